// children-index: enumerating the 10 children of one parent in a root of
// 100,000 persisted sessions. Subject: the SQLite index backend's
// `listSessions({ parentSession })`, an indexed query. Baseline: the same
// call on the in-memory backend, i.e. a full scan of the corpus
// (`persistence.list()` of every header frame, then a filter). Targets: the
// indexed query at most 20 ms median (reported under `extra`) and at least
// 50× faster than the scan (the ratio).
//
// The 100k-session fixture (header-only sessions in a plain-JSONL root, plus
// its index under `<root>/.dsh/`) is built once and cached in
// bench/.fixtures/ (git-ignored); later runs only reconcile it on open.
// `open-listing` reuses it for its index-reopen figure (`childrenIndexFixture`).
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { SessionLogOffset, SessionStore } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createSessionQuery, type SessionQuery } from '@dsh/session-query'
import { createSqliteSessionQuery, defaultIndexPath, INDEX_SCHEMA_VERSION, type SqliteSessionQuery } from '@dsh/session-query-sqlite'
import Database from 'better-sqlite3'
import { CHILDREN, corpusHeaders, INDEXED_TARGET_MS, TARGET_PARENT, TOTAL } from '../fixtures/children-corpus.js'
import { type BenchDefinition, benchRoot, median, time } from '../harness.js'

const FIXTURE_VERSION = 1
const fixture = join(benchRoot, '.fixtures', 'children-index-100k')
const root = join(fixture, 'root')
const readyFile = join(fixture, 'ready.json')

let persistence: SessionPersistence | undefined
let indexed: SqliteSessionQuery | undefined
let scan: SessionQuery | undefined
let ctx: Context | undefined
const subjectSamples: number[] = []
const info: Record<string, unknown> = {}

function fixtureReady(): boolean {
  if (!existsSync(readyFile)) return false
  try {
    const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as { version?: number; sessions?: number }
    return ready.version === FIXTURE_VERSION && ready.sessions === TOTAL
  } catch {
    return false
  }
}

/** Materializes every session header-only (one durable append each, 16 at a time). */
async function buildFixture(): Promise<number> {
  rmSync(fixture, { recursive: true, force: true })
  mkdirSync(fixture, { recursive: true })
  const writer = createJsonlPersistence({ root, compression: 'none', maxOpenWriters: 16 })
  const headers = corpusHeaders()
  let next = 0
  let done = 0
  const ms = await time(() =>
    Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < headers.length) {
          const header = headers[next++]!
          await writer.append({ header, inheritedEventCount: SessionLogOffset(0) }, [])
          if (++done % 10_000 === 0) console.log(`  children-index: fixture ${done}/${headers.length} sessions`)
        }
      }),
    ),
  )
  await writer.close()
  return ms
}

/** The cached 100,000-session root (built on first use): shared with `open-listing`. */
export async function childrenIndexFixture(): Promise<{ root: string; sessions: number; buildMs?: number }> {
  if (fixtureReady()) return { root, sessions: TOTAL }
  console.log(`  children-index: building the ${TOTAL}-session fixture in ${fixture} (cached for later runs) …`)
  const buildMs = Math.round(await buildFixture())
  writeFileSync(readyFile, `${JSON.stringify({ version: FIXTURE_VERSION, sessions: TOTAL })}\n`)
  return { root, sessions: TOTAL, buildMs }
}

const definition: BenchDefinition = {
  name: 'children-index',
  unit: 'ms per listing',
  target: 50,
  compare: 'ge',
  ratio: 'baseline/subject',
  repeats: 5,
  async setup() {
    const built = await childrenIndexFixture()
    if (built.buildMs !== undefined) info.fixtureBuildMs = built.buildMs
    persistence = createJsonlPersistence({ root, compression: 'none' })
    ctx = new Context()
    const sessions = new SessionStore(ctx)
    let lastPhase = ''
    const openMs = await time(async () => {
      indexed = await createSqliteSessionQuery({
        sessions,
        persistence: persistence!,
        path: defaultIndexPath(root),
        onProgress: (p) => {
          const phase = `${p.phase}${p.rebuild === undefined ? '' : ` (rebuild: ${p.rebuild})`}`
          if (phase !== lastPhase || p.done === p.total) console.log(`  children-index: index ${phase} ${p.done}/${p.total}`)
          lastPhase = phase
        },
      })
    })
    info.indexOpenAndReconcileMs = Math.round(openMs)
    scan = createSessionQuery({ sessions, persistence })
    info.indexSchema = INDEX_SCHEMA_VERSION
    // Show that the subject's query is answered by an index, not a table scan.
    const db = new Database(defaultIndexPath(root), { readonly: true })
    try {
      const plan = db
        .prepare(
          'EXPLAIN QUERY PLAN SELECT id, header, inherited, revision, crc FROM sessions WHERE revision IS NOT NULL AND parent = ? ORDER BY created_at, id',
        )
        .all(TARGET_PARENT) as Array<{ detail: string }>
      info.queryPlan = plan.map((row) => row.detail)
    } finally {
      db.close()
    }
  },
  async teardown() {
    await indexed?.close()
    await persistence?.close()
    await ctx?.dispose()
  },
  baseline: {
    label: 'full scan (persistence.list() + filter, in-memory backend)',
    run: async () => {
      let count = -1
      const ms = await time(async () => {
        count = (await scan!.listSessions({ parentSession: TARGET_PARENT })).records.length
      })
      if (count !== CHILDREN) throw new Error(`children-index: the scan found ${count} children, expected ${CHILDREN}`)
      return ms
    },
  },
  subject: {
    label: 'indexed listSessions({ parentSession }) (sqlite backend)',
    run: async () => {
      let count = -1
      const ms = await time(async () => {
        count = (await indexed!.listSessions({ parentSession: TARGET_PARENT })).records.length
      })
      if (count !== CHILDREN) throw new Error(`children-index: the index found ${count} children, expected ${CHILDREN}`)
      subjectSamples.push(ms)
      return ms
    },
  },
  extra: () => {
    // The first sample is the untimed warm-up of the harness.
    const indexedMedian = median(subjectSamples.slice(1))
    return {
      sessions: TOTAL,
      children: CHILDREN,
      indexedMedianMs: Math.round(indexedMedian * 1000) / 1000,
      indexedTargetMs: INDEXED_TARGET_MS,
      indexedPass: indexedMedian <= INDEXED_TARGET_MS,
      persistenceMetrics: persistence?.metrics,
      ...info,
    }
  },
}

export default definition
