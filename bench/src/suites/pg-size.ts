// pg-size: the total relation size of a realistic transcript's stored events
// in PostgreSQL (the batches table with its TOAST table and indexes, as
// `pg_total_relation_size` reports it) against the same events as plain
// JSONL. One durable batch per turn, as the coordinator writes a
// live session (the JSONL `size` suite's corpus and batching). Sizes are
// deterministic (after CHECKPOINT), so the runs only repeat them.
// Ratio = subject / baseline; target <= 0.35.
import type { StoredSessionEvent } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { realisticTurns } from '@dsh/test-kit'
import type pg from 'pg'
import { type BenchPostgres, startBenchPostgres } from '../fixtures/postgres.js'
import { benchHeader } from '../fixtures/transcript.js'
import type { BenchDefinition } from '../harness.js'

const PLAINTEXT_BYTES = 20 * 1024 * 1024

let db: BenchPostgres | undefined
let pool: pg.Pool | undefined
let persistence: PostgresPersistence | undefined
let turns: StoredSessionEvent[][] = []
let plainBytes = 0
let relationBytes = 0
const parts: Record<string, number> = {}

async function size(sql: string): Promise<number> {
  return Number((await pool!.query<{ n: string }>(sql)).rows[0]!.n)
}

const definition: BenchDefinition = {
  name: 'pg-size',
  unit: 'bytes',
  target: 0.35,
  compare: 'le',
  repeats: 3,
  async setup() {
    db = await startBenchPostgres({ max: 2, settings: { fsync: 'off' } })
    pool = db.pool
    persistence = await createPostgresPersistence({ pool })
    turns = realisticTurns(PLAINTEXT_BYTES, 11)
    plainBytes = turns.flat().reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0)
    const target = { header: benchHeader('bench-pg-size'), inheritedEventCount: 0 as never }
    for (const events of turns) await persistence.append(target, events)
    await pool.query('VACUUM ANALYZE dsh_batches')
    await pool.query('CHECKPOINT')
    // The tables are hash-partitioned: every size is the sum over the partition tree (a parent holds no rows).
    const tree = (expression: string, table = 'dsh_batches') =>
      size(`SELECT coalesce(sum(${expression}), 0)::text AS n FROM pg_partition_tree('${table}') t JOIN pg_class c ON c.oid = t.relid`)
    relationBytes = await tree('pg_total_relation_size(t.relid)')
    parts.heap = await tree('pg_relation_size(t.relid)')
    parts.toast = await tree('CASE WHEN c.reltoastrelid = 0 THEN 0 ELSE pg_total_relation_size(c.reltoastrelid) END')
    parts.indexes = await tree('pg_indexes_size(t.relid)')
    parts.bodies = await size('SELECT sum(octet_length(body))::text AS n FROM dsh_batches')
    parts.sessionRowAndChanges =
      (await tree('pg_total_relation_size(t.relid)', 'dsh_sessions')) + (await tree('pg_total_relation_size(t.relid)', 'dsh_changes'))
  },
  async teardown() {
    await persistence?.close()
    await db?.close()
  },
  baseline: {
    label: 'plain JSONL of the same events',
    run: () => plainBytes,
  },
  subject: {
    label: 'pg_total_relation_size over the partitions of dsh_batches: zstd batch rows, TOAST, indexes',
    run: () => relationBytes,
  },
  extra() {
    const events = turns.reduce((n, t) => n + t.length, 0)
    return {
      turns: turns.length,
      events,
      plaintextBytesPerBatch: Math.round(plainBytes / turns.length),
      ...parts,
      note: 'sessionRowAndChanges is per session, not per event: the one header row plus the change feed rows of this transcript (outside the ratio)',
    }
  },
}

export default definition
