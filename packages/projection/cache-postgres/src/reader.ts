import { consoleLogger, type Logger } from '@dsh/context'
import type { SessionHeader } from '@dsh/session'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { checkpointIdentity, decodeCheckpointRow } from '@dsh/session-projection-cache/backend'
import type pg from 'pg'

/** A listed session: whose rows to read (a `SessionQueryRecord` fits). */
export interface CheckpointReadEntry {
  readonly header: SessionHeader
  readonly inheritedEventCount: number
}

/** A unit to read: its key and the state version a stored row must carry. */
export interface CheckpointReadUnit {
  readonly key: string
  readonly stateVersion: number
}

/** The queryable part of a `pg.Pool` (or client) the reader uses. */
export type CheckpointReadPool = Pick<pg.Pool, 'query'>

/** A stored row, as the read returns it. */
interface StoredRow {
  session_id: Buffer
  key: string
  identity: Buffer
  inherited: number
  state_version: number
  seq: number
  failed: boolean
  state: string | null
}

/** PostgreSQL's `undefined_table`: a database whose cache table was never created has no rows. */
const UNDEFINED_TABLE = '42P01'

/**
 * Read-only lookups of cached unit states for a page of listed sessions,
 * for a command that only lists (`dsh sessions --store`): no projection
 * registry, no mirror, no LISTEN, no migration, no write. One statement for
 * the whole page (`session_key = ANY(..) AND key = ANY(..)`, pruned to the
 * sessions' partitions and answered from the primary key).
 *
 * Each entry's result maps each unit key to its state, or `undefined` (a
 * miss) under the rules of the caches' own lookups: the row must be of this
 * lifecycle (the header witness, `checkpointIdentity`), this cut and the
 * unit's `stateVersion`, and not a failed unit; a row whose state is not JSON
 * misses too. The caller checks each state against its unit's schema.
 * Derived data never fails a listing: a missing table misses silently, any
 * other read fault is reported to `logger` and misses.
 */
export async function readCheckpointStates(
  pool: CheckpointReadPool,
  entries: readonly CheckpointReadEntry[],
  units: readonly CheckpointReadUnit[],
  logger: Logger | (() => Logger) = consoleLogger,
): Promise<Array<Record<string, unknown>>> {
  const results = entries.map(() => ({}) as Record<string, unknown>)
  if (entries.length === 0 || units.length === 0) return results
  let rows: StoredRow[]
  try {
    ;({ rows } = await pool.query<StoredRow>(
      `SELECT session_id, key, identity, inherited, state_version, seq, failed, state
       FROM dsh_projection_checkpoints WHERE session_key = ANY($1::bytea[]) AND key = ANY($2::text[])`,
      [entries.map((e) => keyOf(Buffer.from(e.header.id, 'utf8'))), units.map((u) => u.key)],
    ))
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code !== UNDEFINED_TABLE)
      (typeof logger === 'function' ? logger() : logger).warn(
        'dsh: reading checkpoint rows from PostgreSQL failed; the listing shows no cached values.',
        error,
      )
    return results
  }
  const byId = new Map<string, StoredRow[]>()
  for (const row of rows) {
    const id = row.session_id.toString('utf8')
    const list = byId.get(id)
    if (list === undefined) byId.set(id, [row])
    else list.push(row)
  }
  entries.forEach((entry, i) => {
    const stored = byId.get(entry.header.id)
    if (stored === undefined) return
    const identity = checkpointIdentity(entry.header)
    for (const unit of units) {
      const row = stored.find((r) => r.key === unit.key)
      if (
        row === undefined ||
        row.failed ||
        row.identity.toString('utf8') !== identity ||
        row.inherited !== entry.inheritedEventCount ||
        row.state_version !== unit.stateVersion
      )
        continue
      try {
        results[i]![unit.key] = decodeCheckpointRow(entry.header, unit.key, {
          stateVersion: row.state_version,
          seq: row.seq,
          failed: false,
          state: row.state,
        }).state
      } catch {
        // A row that is not JSON: poisoned, a miss.
      }
    }
  })
  return results
}
