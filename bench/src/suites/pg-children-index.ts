// pg-children-index: the 10 children of one parent among 100,000 sessions
// in PostgreSQL. Subject: the PostgreSQL query backend's
// `listSessions({ parentSession })`, an index scan of (parent_key, created_at).
// Baseline: the same call on the in-memory query backend over the same
// PostgreSQL persistence, i.e. a full scan (`persistence.list()` of every
// header row, then a filter). Targets: the indexed query at most 20 ms
// median (under `extra`) and at least 50x faster than the scan (the ratio).
//
// The 100,000 headers (the corpus of `children-index`, one definition in
// bench/src/fixtures/children-corpus.ts) are inserted in one statement with
// the columns `append` writes for a header-only session (header JSON, SHA-256
// keys of id and parent, created_at, origin); setup checks a sample through
// the persistence contract.
import { Context } from '@dsh/context'
import { SessionId, SessionStore } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { createSessionQuery, type SessionQuery } from '@dsh/session-query'
import { createPostgresSessionQuery, type PostgresSessionQuery } from '@dsh/session-query-postgres'
import type pg from 'pg'
import { CHILDREN, corpusHeaders, INDEXED_TARGET_MS, TARGET_PARENT, TOTAL } from '../fixtures/children-corpus.js'
import { type BenchPostgres, startBenchPostgres, tableBytes } from '../fixtures/postgres.js'
import { type BenchDefinition, median, time } from '../harness.js'

const CALLS_PER_SAMPLE = 50

let db: BenchPostgres | undefined
let pool: pg.Pool | undefined
let persistence: PostgresPersistence | undefined
let indexed: PostgresSessionQuery | undefined
let scan: SessionQuery | undefined
let ctx: Context | undefined
const subjectSamples: number[] = []
const info: Record<string, unknown> = {}

async function generate(p: pg.Pool): Promise<void> {
  const headers = corpusHeaders()
  await p.query(
    `INSERT INTO dsh_sessions (id_key, id, header, created_at, parent_key, origin, cwd_key, inherited, next_seq)
     SELECT sha256(convert_to(x.id, 'UTF8')), convert_to(x.id, 'UTF8'), x.header, x.created_at,
            CASE WHEN x.parent IS NULL THEN NULL ELSE sha256(convert_to(x.parent, 'UTF8')) END, x.origin,
            CASE WHEN x.cwd IS NULL THEN NULL ELSE sha256(convert_to(x.cwd, 'UTF8')) END, 0, 0
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS x(id, header, created_at, parent, origin, cwd)`,
    [
      headers.map((h) => h.id),
      headers.map((h) => JSON.stringify(h)),
      headers.map((h) => h.createdAt),
      headers.map((h) => h.parentSession ?? null),
      headers.map((h) => h.origin ?? null),
      headers.map((h) => h.cwd ?? null),
    ],
  )
  await p.query('ANALYZE dsh_sessions')
}

const definition: BenchDefinition = {
  name: 'pg-children-index',
  unit: 'ms',
  target: 50,
  compare: 'ge',
  ratio: 'baseline/subject',
  repeats: 5,
  async setup() {
    db = await startBenchPostgres({ max: 4 })
    pool = db.pool
    persistence = await createPostgresPersistence({ pool })
    await generate(pool)
    ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
    const sessions = new SessionStore(ctx)
    indexed = await createPostgresSessionQuery({ pool, sessions, persistence })
    scan = createSessionQuery({ sessions, persistence })
    // The generated rows are what the contract reads: a sample through persistence and both backends.
    const records = await persistence.list()
    if (records.length !== TOTAL) throw new Error(`pg-children-index: expected ${TOTAL} sessions, persistence lists ${records.length}`)
    const child = records.find((r) => r.header.id === `${TARGET_PARENT}-c3`)
    if (
      child?.header.parentSession !== TARGET_PARENT ||
      child.header.origin !== 'subagent' ||
      (await persistence.stat(SessionId(`${TARGET_PARENT}-c3`))) !== child.revision
    )
      throw new Error('pg-children-index: a generated child does not read back as a persisted session')
    const a = (await indexed.listSessions({ parentSession: TARGET_PARENT })).records.map((r) => r.header.id)
    const b = (await scan.listSessions({ parentSession: TARGET_PARENT })).records.map((r) => r.header.id)
    if (a.length !== CHILDREN || JSON.stringify(a) !== JSON.stringify(b))
      throw new Error(`pg-children-index: the backends disagree: ${a.join(',')} vs ${b.join(',')}`)
    const plan = await pool.query<{ 'QUERY PLAN': string }>(
      'EXPLAIN SELECT sid, header, inherited, next_seq FROM dsh_sessions WHERE parent_key = $1 ORDER BY created_at, id',
      [keyOf(TARGET_PARENT)],
    )
    info.plan = plan.rows.map((r) => r['QUERY PLAN']).join(' | ')
    // Summed over the partitions: the partitioned parent holds no rows of its own.
    info.relationBytes = await tableBytes(pool, 'dsh_sessions')
  },
  async teardown() {
    await indexed?.close()
    await ctx?.dispose()
    await persistence?.close()
    await db?.close()
  },
  baseline: {
    label: 'full scan: persistence.list() of 100,000 header rows + filter',
    run: () => time(() => scan!.listSessions({ parentSession: TARGET_PARENT })),
  },
  subject: {
    label: 'indexed listSessions({ parentSession }) on PostgreSQL',
    async run() {
      const ms =
        (await time(async () => {
          for (let i = 0; i < CALLS_PER_SAMPLE; i++) await indexed!.listSessions({ parentSession: TARGET_PARENT })
        })) / CALLS_PER_SAMPLE
      subjectSamples.push(ms)
      return ms
    },
  },
  extra() {
    const indexedMedian = median(subjectSamples)
    return {
      sessions: TOTAL,
      childrenOfTarget: CHILDREN,
      callsPerSubjectSample: CALLS_PER_SAMPLE,
      indexedMedianMs: Math.round(indexedMedian * 1000) / 1000,
      indexedTargetMs: INDEXED_TARGET_MS,
      indexedWithinTarget: indexedMedian <= INDEXED_TARGET_MS,
      ...info,
    }
  },
}

export default definition
