// pg-scale: PostgreSQL at 10,000,000 sessions (`DSH_PG_SCALE_SESSIONS` runs
// another count), measured. The corpus (fixtures/pg-scale.ts): the
// header-only sessions generated on the server, 1,000 sessions with events
// appended through the persistence API, one parent with 200 children spawned
// through the subagent runtime. A second database holds 100,000 header-only
// sessions for the reference of the CLI comparison.
//
// Ratio (baseline / subject is the harness's pair): a new `dsh sessions
// --store <url> --limit 50` process at the full count against the same at
// 100,000 sessions; target <= 1.5. Requirements: `listChildren` with a warm
// checkpoint cache at most 2x the raw statements it sends (replayed over the
// same pool) at p99, and a listing page of 50 at most 2x its raw statement
// at p99. The raw side is every statement the call sends through any client
// of the process (`captureStatements` records at `pg.Client`, so a checked
// out client or another pool is not missed); a warm `listChildren` sends two,
// its children's and their children's index queries: the checkpoint cache
// answers from its in-process mirror and sends none. Both sides get the same
// untimed warm-up calls first (`WARMUP_CALLS`), and the load is checkpointed
// before anything is timed. Reported besides: p50s, each side's CPU per
// call, collections and slowest calls, the server's own time per statement,
// bytes per session, the load's durations.
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Context } from '@dsh/context'
import pg from 'pg'
import { percentile } from '../fixtures/percentile.js'
import {
  alternate,
  BULK_LOAD_SETTINGS,
  buildScaleCorpus,
  type CapturedStatement,
  captureStatements,
  composeScaleHost,
  PARENT,
  replayStatements,
  SCALE_CHILDREN,
  SCALE_PAGE,
  type ScaleCorpus,
  scaleSessionCount,
  serverTimes,
  WARMUP_CALLS,
} from '../fixtures/pg-scale.js'
import { type BenchPostgres, startBenchPostgres, tableBytes } from '../fixtures/postgres.js'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const run = promisify(execFile)
const REFERENCE_SESSIONS = 100_000
const CALLS = 300
/** The slowest calls reported per side: p99 of 300 is the fourth slowest. */
const TAIL = 4
/** The README's figure for a header-only session row (table, TOAST and indexes). */
const README_BYTES_PER_SESSION = 545
const CLI = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')

const count = scaleSessionCount()
let db: BenchPostgres | undefined
let refPool: pg.Pool | undefined
let mainUrl = ''
let refUrl = ''
let ctx: Context | undefined
let corpus: ScaleCorpus | undefined
let reference: ScaleCorpus | undefined
const figures: Record<string, unknown> = {}
const met: Record<string, boolean> = {}

const round = (x: number): number => Math.round(x * 1000) / 1000

async function cliListing(url: string): Promise<number> {
  let stdout = ''
  const ms = await time(async () => {
    ;({ stdout } = await run(process.execPath, [CLI, 'sessions', '--store', url, '--limit', String(SCALE_PAGE)], { maxBuffer: 1 << 24 }))
  })
  const rows = stdout.split('\n').filter((line) => line.includes('gen-')).length
  if (rows !== SCALE_PAGE)
    throw new Error(`pg-scale: dsh sessions --limit ${SCALE_PAGE} printed ${rows} session rows:\n${stdout.slice(0, 2000)}`)
  return ms
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)

async function pair(label: string, calls: number, subject: () => Promise<unknown>, statements: readonly CapturedStatement[]) {
  const pool = db!.pool
  const t = await alternate(calls, subject, () => replayStatements(pool, statements))
  const s = { p50: percentile(t.subject, 50), p99: percentile(t.subject, 99) }
  const r = { p50: percentile(t.raw, 50), p99: percentile(t.raw, 99) }
  const server = []
  for (const statement of statements) server.push(await serverTimes(pool, statement))
  figures[label] = {
    calls,
    warmupCalls: WARMUP_CALLS,
    subjectMs: { p50: round(s.p50), p99: round(s.p99) },
    rawMs: { p50: round(r.p50), p99: round(r.p99) },
    p50Ratio: round(s.p50 / r.p50),
    p99Ratio: round(s.p99 / r.p99),
    rawStatements: statements.map((x) => x.text.replace(/\s+/g, ' ')),
    // Where the time goes: this process's CPU per call, the collections that began inside each side's
    // calls, the slowest calls, and the server's own time for each statement (EXPLAIN ANALYZE, after).
    cpuMsPerCall: { subject: round(mean(t.subjectCpu)), raw: round(mean(t.rawCpu)) },
    gc: {
      subject: { count: t.gc.subject.count, ms: round(t.gc.subject.ms) },
      raw: { count: t.gc.raw.count, ms: round(t.gc.raw.ms) },
    },
    slowestMs: {
      subject: [...t.subject]
        .sort((a, b) => b - a)
        .slice(0, TAIL)
        .map(round),
      raw: [...t.raw]
        .sort((a, b) => b - a)
        .slice(0, TAIL)
        .map(round),
    },
    serverMs: server.map((x) => ({ planning: round(x.planningMs), execution: round(x.executionMs) })),
  }
  return s.p99 / r.p99
}

const definition: BenchDefinition = {
  name: 'pg-scale',
  unit: 'ms',
  target: 1.5,
  compare: 'le',
  repeats: 7,
  async setup() {
    db = await startBenchPostgres({ max: 8, settings: BULK_LOAD_SETTINGS, database: 'scale' })
    mainUrl = db.url
    refUrl = await db.cluster.createDatabase('reference')
    const mainPool = db.pool
    refPool = new pg.Pool({ connectionString: refUrl, max: 2 })
    const log = (line: string) => console.log(`  pg-scale: ${line}`)
    corpus = await buildScaleCorpus(mainPool, { count, real: true, log })
    reference = await buildScaleCorpus(refPool, { count: Math.min(count, REFERENCE_SESSIONS), real: false })
    ctx = await composeScaleHost(mainPool)
    const subagents = ctx.require('subagents')
    const query = ctx.require('sessionQuery')
    const explained = await subagents.explainChildren(PARENT)
    if (explained.length !== SCALE_CHILDREN || !explained.every((e) => e.rung === 2))
      throw new Error(`pg-scale: the warm cache does not serve all ${SCALE_CHILDREN} children (${explained.length} listed)`)
    const listStatements = await captureStatements(() => subagents.listChildren(PARENT))
    const page = await query.listSessions({ limit: SCALE_PAGE })
    if (page.records.length !== SCALE_PAGE) throw new Error(`pg-scale: a page of ${SCALE_PAGE} listed ${page.records.length}`)
    const pageStatements = await captureStatements(() => query.listSessions({ limit: SCALE_PAGE }))
    const listRatio = await pair('listChildren', CALLS, () => subagents.listChildren(PARENT), listStatements)
    const pageRatio = await pair('listingPage', CALLS, () => query.listSessions({ limit: SCALE_PAGE }), pageStatements)
    met.listChildrenP99 = listRatio <= 2
    met.listingPageP99 = pageRatio <= 2
    const sessionBytes = await tableBytes(mainPool, 'dsh_sessions')
    figures.bytesPerSession = {
      dshSessionsBytes: sessionBytes,
      sessions: corpus.total,
      perSession: round(sessionBytes / corpus.total),
      readmeFigure: README_BYTES_PER_SESSION,
      referenceDatabasePerSession: round((await tableBytes(refPool, 'dsh_sessions')) / reference.total),
    }
  },
  async teardown() {
    await ctx?.dispose()
    await refPool?.end()
    await db?.close()
  },
  baseline: {
    label: `dsh sessions --store --limit ${SCALE_PAGE}, new process, ${REFERENCE_SESSIONS.toLocaleString('en')} sessions`,
    run: () => cliListing(refUrl),
  },
  subject: {
    label: `the same at ${count.toLocaleString('en')} sessions`,
    run: () => cliListing(mainUrl),
  },
  extra() {
    return {
      sessions: corpus?.total,
      generatedHeaderOnly: count,
      referenceSessions: reference?.total,
      load: {
        generateSeconds: round((corpus?.generateMs ?? 0) / 1000),
        vacuumAnalyzeSeconds: round((corpus?.analyzeMs ?? 0) / 1000),
        checkpointSeconds: round((corpus?.checkpointMs ?? 0) / 1000),
        realSessionsSeconds: round((corpus?.realMs ?? 0) / 1000),
        childrenSeconds: round((corpus?.familyMs ?? 0) / 1000),
      },
      clusterSettings: BULK_LOAD_SETTINGS,
      ...figures,
    }
  },
  requirements: () => met,
}

export default definition
