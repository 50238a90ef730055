// open-listing: what a command costs on a root of 10,000 sessions.
// Subject: a new process running `dsh sessions --limit 50 --json` (the CLI,
// `node apps/dsh/dist/bin.js`). Baseline: a new process running the same
// SQLite query on the same index with better-sqlite3 alone (open, one
// SELECT of the first page, JSON out). Ratio = subject / baseline, target
// <= 1.5: opening a root with nothing changed must cost about what reading
// its index costs (no log, no header read; the change feed says so).
//
// Also reported under `extra` (target: 0 header reads, <= 50 ms): reopening
// the SQLite index over the 100,000-session root of `children-index` with
// nothing changed, in process — the reconciliation through the change feed.
//
// `extra` also counts the module files each process loads (its cost is
// mostly module loading): `cliModules` against `libraryModules`.
//
// The 10,000-session fixture (a zstd JSONL root, one small event per session,
// and its index) is built once under bench/.fixtures (git-ignored). Build the
// CLI first: `npx turbo run build --filter=@dsh/cli...`.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { SessionLogOffset, SessionSeq, SessionStore } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createSqliteSessionQuery, defaultIndexPath, type ReconcileReport } from '@dsh/session-query-sqlite'
import { headerOf } from '@dsh/test-kit'
import { type BenchDefinition, benchRoot, median, time } from '../harness.js'
import { childrenIndexFixture } from './children-index.js'

const SESSIONS = 10_000
const PAGE = 50
const REOPEN_TARGET_MS = 50
const REOPEN_REPEATS = 5
const FIXTURE_VERSION = 1
const fixture = join(benchRoot, '.fixtures', `open-listing-10k-v${FIXTURE_VERSION}`)
const root = join(fixture, 'root')
const readyFile = join(fixture, 'ready.json')
const cli = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.js')
const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')

/** The baseline process: the index's first page with better-sqlite3 alone, out as the wire body `dsh sessions --json` prints (`{ sessions }`). */
const RAW_QUERY = `
const Database = require(process.argv[1])
const db = new Database(process.argv[2], { readonly: true })
const rows = db.prepare('SELECT id, header, inherited, revision FROM sessions WHERE revision IS NOT NULL ORDER BY created_at, id LIMIT ?').all(Number(process.argv[3]) + 1)
db.close()
const records = rows.slice(0, Number(process.argv[3])).map((r) => ({ header: JSON.parse(r.header), inheritedEventCount: r.inherited, live: false, persisted: true, revision: r.revision }))
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

async function buildFixture(): Promise<void> {
  rmSync(fixture, { recursive: true, force: true })
  mkdirSync(fixture, { recursive: true })
  const writer = createJsonlPersistence({ root, maxOpenWriters: 16 })
  const base = 1_700_000_000_000
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < SESSIONS) {
        const i = next++
        const header = headerOf(`s${String(i).padStart(5, '0')}`, { createdAt: base + i, cwd: `/work/p${i % 20}` })
        await writer.append({ header, inheritedEventCount: SessionLogOffset(0) }, [
          { type: 'user/message', seq: SessionSeq(0), time: base + i, data: { text: `question number ${i} about the listing` } },
        ])
      }
    }),
  )
  await writer.close()
  writeFileSync(readyFile, `${JSON.stringify({ version: FIXTURE_VERSION, sessions: SESSIONS })}\n`)
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

function pageIds(stdout: string): string[] {
  const page = JSON.parse(stdout) as { sessions: Array<{ header: { id: string } }> }
  return page.sessions.map((r) => r.header.id)
}

const cliArgs = [cli, 'sessions', '--root', root, '--limit', String(PAGE), '--json']
const rawArgs = ['-e', RAW_QUERY, sqlite, defaultIndexPath(root), String(PAGE)]
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
    const viaCli = pageIds(runProcess(cliArgs).stdout)
    const viaSqlite = pageIds(runProcess(rawArgs).stdout)
    const viaLibrary = pageIds(runProcess(libraryArgs).stdout)
    if (viaCli.length !== PAGE || viaCli.join() !== viaSqlite.join() || viaLibrary.join() !== viaSqlite.join())
      throw new Error('open-listing: the CLI, the library and the raw query disagree on the first page')
  },
  baseline: {
    label: `new process: the same SQLite query with better-sqlite3 alone (first ${PAGE} of ${SESSIONS})`,
    run: () => runProcess(rawArgs).ms,
  },
  subject: {
    label: `new process: dsh sessions --limit ${PAGE} --json (${SESSIONS} sessions)`,
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
