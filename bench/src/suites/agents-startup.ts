// agents-startup: what `dsh agents P` costs as a new process, for a parent
// with 200 children whose checkpoints are cached (every row from rung 2).
// Subject: a new process running `dsh agents P --root <root>` (the CLI,
// `node apps/dsh/dist/bin.cjs`, the table as printed, each row with the child's
// tokens and duration). Baseline: a new process doing the same lookups with
// better-sqlite3 alone: the index query for the parent's subagent children
// (with whether each has children of its own) and three checkpoint-cache point
// lookups per child (its `subagent`, `subagentTiming` and `sessionStats`
// rows), the tokens summed, JSON out. Ratio = subject / baseline, target <=
// 1.5: a short read command costs about what its SQLite reads cost, which
// holds only while the CLI loads little besides them (the catalog still checks
// each cached row against its unit's schema).
//
// The fixture (a JSONL root with its index and projection cache, built
// through the real host) is built in a temporary directory on every run and
// removed after. `extra` reports the module files (ESM and CommonJS) each
// side loads. Build the CLI first: `npx turbo run build --filter=@dsh/cli...`.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@dsh/host'
import { createScriptedDriver } from '@dsh/subagent'
import { type BenchDefinition, benchRoot } from '../harness.js'

const CHILDREN = 200
const PARENT = 'bench-parent'
/** Processes per sample, so one sample is long enough to time. */
const PROCESSES = 3
const cli = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')

/**
 * The baseline process: the parent's subagent children from the index (in
 * listing order, each with whether it has subagent children of its own, looked
 * up in the parent index: without statistics SQLite would answer that from
 * the origin index, stepping through every subagent once per child, as the
 * query layer's own statements are written to avoid), then
 * each child's `subagent`, `subagentTiming` and `sessionStats` checkpoint rows
 * from the cache by primary key, each state read after the row's witness
 * line; the identity, the settled time and the tokens (summed over the
 * models) out as JSON.
 */
const RAW_LOOKUPS = `
const Database = require(process.argv[1])
const root = process.argv[2]
const index = new Database(root + '/.dsh/index.sqlite', { readonly: true })
const cache = new Database(root + '/.dsh/projections.sqlite', { readonly: true })
const children = index
  .prepare("SELECT s.id, EXISTS (SELECT 1 FROM sessions c INDEXED BY sessions_by_parent WHERE c.parent = s.id AND c.origin = 'subagent' AND c.revision IS NOT NULL) AS nested FROM sessions s WHERE s.revision IS NOT NULL AND s.parent = ? AND s.origin = 'subagent' ORDER BY s.created_at, s.id")
  .all(process.argv[3])
const lookup = cache.prepare('SELECT payload FROM checkpoint_rows WHERE session_id = ? AND key = ?').pluck()
const state = (id, key) => {
  const payload = lookup.get(id, key)
  return JSON.parse(payload.slice(payload.indexOf('\\n') + 1))[1]
}
const rows = children.map((child) => {
  const identity = state(child.id, 'subagent').identity
  const durationMs = state(child.id, 'subagentTiming').settledMs
  let tokens = 0
  for (const model of state(child.id, 'sessionStats').byModel) for (const count of Object.values(model.tokens)) tokens += count
  return { id: child.id, mode: identity.mode, label: identity.label, hasChildren: child.nested === 1, tokens, durationMs }
})
index.close()
cache.close()
process.stdout.write(JSON.stringify(rows) + '\\n')
`

let dir = ''
let root = ''
const info: Record<string, unknown> = {}

/** Each child's one model call reports usage, so its row has tokens to show. */
const withUsage = createScriptedDriver((run) => [
  { kind: 'chunk', text: 'Audited.' },
  { kind: 'message', text: `Audited: ${run.prompt ?? ''}`, usage: { input: 1000 + run.turn, output: 200 } },
])

/** A parent with CHILDREN children spawned through the real host (scripted driver), all cold: their checkpoints are in the cache. */
async function buildFixture(): Promise<void> {
  const host = await createHost({ root, driver: withUsage })
  try {
    const parent = host.sessions.create({ id: PARENT })
    parent.append('user/message', { text: 'Split the audit across subagents.' })
    for (let i = 0; i < CHILDREN; i += 20) {
      const runs = []
      for (let j = i; j < Math.min(i + 20, CHILDREN); j++)
        runs.push(
          host.subagents.spawn(parent, {
            id: `child-${String(j).padStart(4, '0')}`,
            mode: j % 2 === 0 ? 'one-shot' : 'continuable',
            label: `worker ${j}`,
            context: j % 2 === 0 ? 'fork' : 'fresh',
            prompt: `Audit part ${j}.`,
          }).done,
        )
      for (const outcome of await Promise.all(runs))
        if (outcome.reason !== 'completed') throw new Error(`agents-startup: a fixture child failed: ${outcome.reason}`)
    }
  } finally {
    // Disposing settles the runs and writes every session's final checkpoint.
    await host.dispose()
  }
}

function runProcess(args: readonly string[]): { ms: number; stdout: string } {
  const start = process.hrtime.bigint()
  const child = spawnSync(process.execPath, args, { cwd: benchRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (child.status !== 0) throw new Error(`agents-startup: '${args.join(' ')}' exited ${child.status}: ${child.stderr.slice(0, 2000)}`)
  return { ms, stdout: child.stdout }
}

function runProcesses(args: () => readonly string[]): () => number {
  return () => {
    let ms = 0
    for (let i = 0; i < PROCESSES; i++) ms += runProcess(args()).ms
    return ms
  }
}

/**
 * Preloaded with --import: reports every file module the process resolves
 * (ESM) and, at exit, every file in the require cache (CommonJS, such as
 * better-sqlite3's), on stderr.
 */
const TRACE_FILES = `data:text/javascript,${encodeURIComponent(
  [
    `import { createRequire, register } from 'node:module'`,
    `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(
      "export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.startsWith('file:')) process.stderr.write('FILE ' + r.url + '\\n'); return r }",
    )}))`,
    `const cache = createRequire(process.execPath).cache`,
    `process.on('exit', () => { for (const file of Object.keys(cache)) process.stderr.write('FILE file://' + file + '\\n') })`,
  ].join('\n'),
)}`

/** The distinct module files (ESM and CommonJS) a process running `args` loads. */
function moduleFiles(args: readonly string[]): number {
  const child = spawnSync(process.execPath, ['--import', TRACE_FILES, ...args], { cwd: benchRoot, encoding: 'utf8' })
  if (child.status !== 0)
    throw new Error(`agents-startup: tracing '${args.join(' ')}' exited ${child.status}: ${child.stderr.slice(0, 2000)}`)
  return new Set(child.stderr.split('\n').filter((line) => line.startsWith('FILE '))).size
}

const cliArgs = (): string[] => [cli, 'agents', PARENT, '--root', root]
const rawArgs = (): string[] => ['-e', RAW_LOOKUPS, sqlite, root, PARENT]

interface CliRow {
  readonly kind: string
  readonly id: string
  readonly mode?: string
  readonly label?: string
  readonly hasChildren?: boolean
  readonly rung: number
  readonly tokens?: number | null
  readonly durationMs?: number | null
}

const definition: BenchDefinition = {
  name: 'agents-startup',
  unit: `ms per ${PROCESSES} processes`,
  target: 1.5,
  compare: 'le',
  repeats: 11,
  async setup() {
    if (!existsSync(cli))
      throw new Error(`agents-startup: ${cli} is missing; build the CLI first (npx turbo run build --filter=@dsh/cli...).`)
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-agents-'))
    root = join(dir, 'root')
    try {
      const start = process.hrtime.bigint()
      await buildFixture()
      info.fixtureBuildMs = Math.round(Number(process.hrtime.bigint() - start) / 1e6)
      // The warm side must be warm: every row from the checkpoint cache, and the same rows the raw lookups find.
      const listed = (JSON.parse(runProcess([...cliArgs(), '--json']).stdout) as { rows: CliRow[] }).rows
      const cold = listed.filter(
        (row) => row.rung !== 2 || typeof row.tokens !== 'number' || row.tokens === 0 || typeof row.durationMs !== 'number',
      )
      if (listed.length !== CHILDREN || cold.length > 0)
        throw new Error(
          `agents-startup: expected ${CHILDREN} rows from the checkpoint cache with tokens and duration, got ${listed.length} (${cold.length} not)`,
        )
      const viaCli = listed.map((row) => ({
        id: row.id,
        mode: row.mode,
        label: row.label,
        hasChildren: row.hasChildren,
        tokens: row.tokens,
        durationMs: row.durationMs,
      }))
      if (runProcess(rawArgs()).stdout.trim() !== JSON.stringify(viaCli))
        throw new Error('agents-startup: the CLI and the raw lookups disagree on the children')
      if (runProcess(cliArgs()).stdout.trim().split('\n').length !== CHILDREN)
        throw new Error('agents-startup: the table does not have a line per child')
      info.cliModules = moduleFiles(cliArgs())
      info.rawModules = moduleFiles(rawArgs())
    } catch (error) {
      // The harness only tears down after a successful setup.
      rmSync(dir, { recursive: true, force: true })
      throw error
    }
  },
  teardown() {
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: `new process: the index query and ${3 * CHILDREN} checkpoint-cache lookups (identity, timing, stats) with better-sqlite3 alone`,
    run: runProcesses(rawArgs),
  },
  subject: {
    label: `new process: dsh agents (${CHILDREN} children, warm cache)`,
    run: runProcesses(cliArgs),
  },
  extra: () => ({ children: CHILDREN, processesPerSample: PROCESSES, ...info }),
}

export default definition
