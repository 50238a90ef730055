// open-listing: what a command costs on a root of 10,000 sessions.
// Subject: a new process running `dsh sessions --limit 50 --json --prices FILE`
// (the CLI, `node apps/dsh/dist/bin.cjs`), whose entries carry title, tokens and
// cost from the projection cache. Baseline: a new process doing the same reads
// with better-sqlite3 alone: open the index, one SELECT of the first page, open
// the projection cache, one primary-key lookup of the `sessionTitle` row and
// one of the `sessionStats` row per listed session (their JSON parsed, the
// title and tokens taken), JSON out. Ratio = subject / baseline, target <= 1.5:
// opening a root with nothing changed must cost about what reading its index
// and cache costs (no log, no header read; the change feed says so).
//
// Also reported under `extra` (target: 0 header reads, <= 50 ms): reopening
// the SQLite index over the 100,000-session root of `children-index` with
// nothing changed, in process — the reconciliation through the change feed.
//
// `extra` also counts the module files each process loads (its cost is
// mostly module loading): `cliModules` against `libraryModules`.
//
// The 10,000-session fixture (a zstd JSONL root, one short turn with usage per
// session, its index and a warm projection cache: every session's checkpoint
// rows) is built once under bench/.fixtures (git-ignored). Build the
// CLI first: `npx turbo run build --filter=@dsh/cli...`.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { createHost } from '@dsh/host'
import { Session, type SessionHeader, SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { projectionCachePath, SqliteProjectionCache } from '@dsh/session-projection-cache'
import { createSqliteSessionQuery, defaultIndexPath, type ReconcileReport } from '@dsh/session-query-sqlite'
import { headerOf } from '@dsh/test-kit'
import { type BenchDefinition, benchRoot, median, time } from '../harness.js'
import { childrenIndexFixture } from './children-index.js'

const SESSIONS = 10_000
const PAGE = 50
const REOPEN_TARGET_MS = 50
const REOPEN_REPEATS = 5
const FIXTURE_VERSION = 2
const fixture = join(benchRoot, '.fixtures', `open-listing-10k-v${FIXTURE_VERSION}`)
const root = join(fixture, 'root')
const readyFile = join(fixture, 'ready.json')
const pricesFile = join(fixture, 'prices.json')
const cli = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')

/**
 * The baseline process: the index's first page, then each listed session's
 * `sessionTitle` and `sessionStats` checkpoint rows by primary key, with
 * better-sqlite3 alone, out as the wire body `dsh sessions --json` prints.
 */
const RAW_QUERY = `
const Database = require(process.argv[1])
const db = new Database(process.argv[2], { readonly: true })
const rows = db.prepare('SELECT id, header, inherited, revision FROM sessions WHERE revision IS NOT NULL ORDER BY created_at, id LIMIT ?').all(Number(process.argv[3]) + 1)
db.close()
const cache = new Database(process.argv[4], { readonly: true })
const row = cache.prepare('SELECT payload FROM checkpoint_rows WHERE session_id = ? AND key = ?').pluck()
const state = (id, key) => {
  const payload = row.get(id, key)
  return payload === undefined ? undefined : JSON.parse(payload.slice(payload.indexOf('\\n') + 1))[1]
}
const records = rows.slice(0, Number(process.argv[3])).map((r) => {
  const title = state(r.id, 'sessionTitle')
  const stats = state(r.id, 'sessionStats')
  const tokens = stats === undefined ? null : stats.byModel.reduce((n, m) => n + m.tokens.input + m.tokens.output + m.tokens.cacheRead + m.tokens.cacheWrite + m.tokens.reasoning, 0)
  return { header: JSON.parse(r.header), inheritedEventCount: r.inherited, live: false, persisted: true, revision: r.revision, title: title?.ownPrompt?.title ?? null, tokens, cost: null }
})
cache.close()
process.stdout.write(JSON.stringify({ sessions: records }) + '\\n')
`

/**
 * A third process, for the details only: the same listing through the
 * library alone (JSONL persistence read-only + the SQLite query backend, no
 * host, no CLI). Its distance from the baseline is what our persistence and
 * query stack cost; the CLI's distance from it is what the composition costs.
 */
const LIBRARY_LISTING = `
const { Context } = await import('@dsh/context')
const { SessionStore } = await import('@dsh/session')
const { createJsonlPersistence } = await import('@dsh/session-persistence-jsonl')
const { createSqliteSessionQuery, defaultIndexPath } = await import('@dsh/session-query-sqlite')
const root = process.argv[1]
const persistence = createJsonlPersistence({ root, readOnly: true })
const query = await createSqliteSessionQuery({ sessions: new SessionStore(new Context()), persistence, path: defaultIndexPath(root) })
const page = await query.listSessions({ limit: Number(process.argv[2]) })
process.stdout.write(JSON.stringify({ sessions: page.records }) + '\\n')
await query.close()
await persistence.close()
`

const info: Record<string, unknown> = {}

function fixtureReady(): boolean {
  try {
    const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as { version?: number; sessions?: number }
    return ready.version === FIXTURE_VERSION && ready.sessions === SESSIONS
  } catch {
    return false
  }
}

const BASE_TIME = 1_700_000_000_000

const headerAt = (i: number): SessionHeader =>
  headerOf(`s${String(i).padStart(5, '0')}`, { createdAt: BASE_TIME + i, cwd: `/work/p${i % 20}` })

/** Session i's log: its question, then one turn of one model step with usage. */
function eventsAt(i: number): StoredSessionEvent[] {
  const time = BASE_TIME + i
  const events: [string, unknown][] = [
    ['user/message', { text: `question number ${i} about the listing` }],
    ['turn/start', { turn: 1 }],
    ['step/start', { turn: 1, step: 0, provider: 'bench-provider', model: i % 2 === 0 ? 'bench-model' : 'unpriced-model' }],
    ['assistant/message', { turn: 1, text: `answer number ${i}` }],
    ['step/end', { turn: 1, step: 0, usage: { input: 100 + (i % 50), output: 20, cacheRead: 10 }, finish: 'stop' }],
    ['turn/end', { turn: 1, reason: 'completed' }],
  ]
  return events.map(([type, data], seq) => ({ type, seq: SessionSeq(seq), time: time + seq, data }) as StoredSessionEvent)
}

async function buildFixture(): Promise<void> {
  rmSync(fixture, { recursive: true, force: true })
  mkdirSync(fixture, { recursive: true })
  const writer = createJsonlPersistence({ root, maxOpenWriters: 16 })
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < SESSIONS) {
        const i = next++
        await writer.append({ header: headerAt(i), inheritedEventCount: SessionLogOffset(0) }, eventsAt(i))
      }
    }),
  )
  await writer.close()
  await warmCache()
  writeFileSync(
    pricesFile,
    `${JSON.stringify({ currency: 'USD', providers: { 'bench-provider': { 'bench-model': { input: 1, output: 4, cacheRead: 0.1 } } } })}\n`,
  )
  writeFileSync(readyFile, `${JSON.stringify({ version: FIXTURE_VERSION, sessions: SESSIONS })}\n`)
}

/** Every session's checkpoint rows in the root's projection cache, folded by the units a host registers: a warm cache. */
async function warmCache(): Promise<void> {
  const host = await createHost({ root })
  try {
    const cache = host.ctx.require('sessionProjectionCache')
    if (!(cache instanceof SqliteProjectionCache) || cache.path !== projectionCachePath(root))
      throw new Error("open-listing: the host's projection cache is not the root's SQLite file")
    const projections = host.ctx.require('sessionProjections')
    for (let i = 0; i < SESSIONS; i++) {
      const session = new Session({ header: headerAt(i), events: eventsAt(i), inheritedEventCount: SessionLogOffset(0) })
      if (!cache.writeColdRows(session, projections.checkpoint(session))) throw new Error(`open-listing: caching session ${i} failed`)
    }
  } finally {
    await host.dispose()
  }
}

async function reconcileIndex(at: string): Promise<void> {
  const persistence = createJsonlPersistence({ root: at })
  const ctx = new Context()
  try {
    const query = await createSqliteSessionQuery({ sessions: new SessionStore(ctx), persistence, path: defaultIndexPath(at) })
    await query.close()
  } finally {
    await persistence.close()
    await ctx.dispose()
  }
}

function runProcess(args: readonly string[]): { ms: number; stdout: string } {
  const start = process.hrtime.bigint()
  // From the bench package, so that a script given with -e resolves its imports.
  const child = spawnSync(process.execPath, args, { cwd: benchRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (child.status !== 0) throw new Error(`open-listing: '${args.join(' ')}' exited ${child.status}: ${child.stderr.slice(0, 2000)}`)
  return { ms, stdout: child.stdout }
}

/** Preloaded with --import: reports every file module the process resolves, on stderr. */
const TRACE_FILES = `data:text/javascript,${encodeURIComponent(
  `import { register } from 'node:module'\nregister('data:text/javascript,' + encodeURIComponent(${JSON.stringify(
    "export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.startsWith('file:')) process.stderr.write('FILE ' + r.url + '\\n'); return r }",
  )}))`,
)}`

/** How many distinct module files a process running `args` loads. */
function moduleFiles(args: readonly string[]): number {
  const child = spawnSync(process.execPath, ['--import', TRACE_FILES, ...args], {
    cwd: benchRoot,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
  if (child.status !== 0)
    throw new Error(`open-listing: tracing '${args.join(' ')}' exited ${child.status}: ${child.stderr.slice(0, 2000)}`)
  return new Set(child.stderr.split('\n').filter((line) => line.startsWith('FILE '))).size
}

/** Each listed session's id, with its title and tokens when `values` (every one known: the cache is warm). */
function pageRows(stdout: string, values: boolean): string[] {
  const page = JSON.parse(stdout) as { sessions: Array<{ header: { id: string }; title?: string | null; tokens?: number | null }> }
  return page.sessions.map((r) => {
    if (!values) return r.header.id
    if (typeof r.title !== 'string' || typeof r.tokens !== 'number') throw new Error(`open-listing: ${r.header.id} lists no cached values`)
    return `${r.header.id}|${r.title}|${r.tokens}`
  })
}

const cliArgs = [cli, 'sessions', '--root', root, '--limit', String(PAGE), '--json', '--prices', pricesFile]
const rawArgs = ['-e', RAW_QUERY, sqlite, defaultIndexPath(root), String(PAGE), projectionCachePath(root)]
const libraryArgs = ['--input-type=module', '-e', LIBRARY_LISTING, root, String(PAGE)]

/** Index reopen with nothing changed over the 100k root: ms, header and body reads, what the reconciliation did. */
async function reopenFigures(): Promise<Record<string, unknown>> {
  const big = await childrenIndexFixture()
  const open = async (): Promise<{ ms: number; report: ReconcileReport | undefined; headerReads: number; bodyReads: number }> => {
    const persistence = createJsonlPersistence({ root: big.root, compression: 'none' })
    const ctx = new Context()
    let report: ReconcileReport | undefined
    try {
      const ms = await time(async () => {
        const query = await createSqliteSessionQuery({
          sessions: new SessionStore(ctx),
          persistence,
          path: defaultIndexPath(big.root),
          reconcileOnOpen: false,
        })
        report = await query.reconcile()
        await query.close()
      })
      return { ms, report, headerReads: persistence.metrics.headerReads, bodyReads: persistence.metrics.bodyReads }
    } finally {
      await persistence.close()
      await ctx.dispose()
    }
  }
  // The first open brings the index up to date (a rebuild after a schema change); then nothing changes.
  const first = await open()
  const runs = []
  for (let i = 0; i < REOPEN_REPEATS; i++) runs.push(await open())
  const ms = median(runs.map((r) => r.ms))
  const last = runs.at(-1)!
  return {
    sessions: big.sessions,
    ...(big.buildMs === undefined ? {} : { fixtureBuildMs: big.buildMs }),
    firstOpenMs: Math.round(first.ms),
    reopenMedianMs: Math.round(ms * 10) / 10,
    reopenSamplesMs: runs.map((r) => Math.round(r.ms * 10) / 10),
    reopenHeaderReads: last.headerReads,
    reopenBodyReads: last.bodyReads,
    reopenReport: last.report,
    reopenTargetMs: REOPEN_TARGET_MS,
    reopenPass: last.headerReads === 0 && ms <= REOPEN_TARGET_MS,
  }
}

const definition: BenchDefinition = {
  name: 'open-listing',
  unit: 'ms per process',
  target: 1.5,
  compare: 'le',
  repeats: 7,
  async setup() {
    if (!existsSync(cli))
      throw new Error(`open-listing: ${cli} is missing; build the CLI first (npx turbo run build --filter=@dsh/cli...).`)
    if (!fixtureReady()) {
      console.log(`  open-listing: building the ${SESSIONS}-session fixture in ${fixture} (cached for later runs) …`)
      info.fixtureBuildMs = Math.round(await time(buildFixture))
    }
    // Read-only commands use an index only when one exists: build (or bring up to date) the root's index here.
    info.indexBuildMs = Math.round(await time(() => reconcileIndex(root)))
    info.firstCommandMs = Math.round(runProcess(cliArgs).ms)
    const viaCli = pageRows(runProcess(cliArgs).stdout, true)
    const viaSqlite = pageRows(runProcess(rawArgs).stdout, true)
    const viaLibrary = pageRows(runProcess(libraryArgs).stdout, false)
    if (viaCli.length !== PAGE || viaCli.join() !== viaSqlite.join() || viaLibrary.join() !== viaSqlite.map((r) => r.split('|')[0]).join())
      throw new Error('open-listing: the CLI, the library and the raw query disagree on the first page')
  },
  baseline: {
    label: `new process: the same SQLite query and 2 checkpoint-row lookups per session with better-sqlite3 alone (first ${PAGE} of ${SESSIONS})`,
    run: () => runProcess(rawArgs).ms,
  },
  subject: {
    label: `new process: dsh sessions --limit ${PAGE} --json --prices FILE (${SESSIONS} sessions, warm projection cache)`,
    run: () => runProcess(cliArgs).ms,
  },
  async extra() {
    const library = Array.from({ length: 5 }, () => runProcess(libraryArgs).ms)
    return {
      sessions: SESSIONS,
      page: PAGE,
      ...info,
      libraryProcessMedianMs: Math.round(median(library) * 10) / 10,
      libraryProcessLabel:
        'new process: the same listing through @dsh/session-persistence-jsonl (read-only) + @dsh/session-query-sqlite alone, no host',
      cliModules: moduleFiles(cliArgs),
      libraryModules: moduleFiles(libraryArgs),
      indexReopen100k: await reopenFigures(),
    }
  },
}

export default definition
