import type pg from 'pg'
import { PostgresPersistenceError } from './errors.js'

/**
 * How the per-session tables are split. Every per-session table is
 * declaratively hash-partitioned on its session's distribution key (the
 * SHA-256 of the id: `id_key`, `session_key` in the checkpoint table) into
 * the same number of partitions, so the rows of one session sit in the
 * same-numbered partition of every table, and every unique and foreign key
 * includes the key: the constraints a distributed PostgreSQL (Citus) places
 * on co-located distributed tables hold on a single server too.
 */
export interface Layout {
  readonly partitions: number
}

export const DEFAULT_PARTITIONS = 16
export const MAX_PARTITIONS = 1024

const LAYOUT_TABLE = `CREATE TABLE IF NOT EXISTS dsh_layout (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  partitions integer NOT NULL CHECK (partitions BETWEEN 1 AND ${MAX_PARTITIONS})
)`

/** `partitions` must be a whole number in 1…1024. */
export function checkPartitions(partitions: unknown): number {
  if (typeof partitions !== 'number' || !Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      `partitions must be a whole number from 1 to ${MAX_PARTITIONS}, got ${String(partitions)}.`,
      { details: { partitions: String(partitions) } },
    )
  }
  return partitions
}

/**
 * The database's layout, read inside a migration's transaction (under the
 * migration lock). The first migration that needs it records `requested`
 * (default 16); afterwards the recorded count is the layout, and a different
 * `requested` is refused: repartitioning is a dump and restore, not a step.
 */
export async function resolveLayout(client: pg.ClientBase, requested: number | undefined): Promise<Layout> {
  if (requested !== undefined) checkPartitions(requested)
  // A recorded count is only read: checking it needs no privilege beyond SELECT.
  // (Inside the migration's transaction: a failed statement would abort it, so no SELECT of a missing table.)
  const { rows: found } = await client.query<{ present: boolean }>(`SELECT to_regclass('dsh_layout') IS NOT NULL AS present`)
  let recorded =
    found[0]?.present === true
      ? (await client.query<{ partitions: number }>('SELECT partitions FROM dsh_layout')).rows[0]?.partitions
      : undefined
  if (recorded === undefined) {
    await client.query(LAYOUT_TABLE)
    const { rows } = await client.query<{ partitions: number }>(
      `WITH i AS (INSERT INTO dsh_layout (partitions) VALUES ($1) ON CONFLICT (singleton) DO NOTHING RETURNING partitions)
       SELECT partitions FROM i UNION ALL SELECT partitions FROM dsh_layout`,
      [requested ?? DEFAULT_PARTITIONS],
    )
    recorded = rows[0]!.partitions
  }
  if (requested !== undefined && requested !== recorded) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      `The per-session tables of this database are split into ${recorded} partitions; migrate cannot change that to ${requested}. Run 'dsh migrate' without --partitions, or move the data to a new database created with the count you want.`,
      { details: { partitions: recorded, requested } },
    )
  }
  return { partitions: recorded }
}

/** The statements that create `table`'s hash partitions `<table>_p0` … (the parent is `PARTITION BY HASH`). */
export function partitionsOf(table: string, layout: Layout): string[] {
  return Array.from(
    { length: layout.partitions },
    (_, i) => `CREATE TABLE ${table}_p${i} PARTITION OF ${table} FOR VALUES WITH (MODULUS ${layout.partitions}, REMAINDER ${i})`,
  )
}
