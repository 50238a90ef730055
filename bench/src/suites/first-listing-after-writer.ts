// first-listing-after-writer: what the first command costs after a process
// wrote a root. A writer process (`createHost`, as a runtime uses it) creates
// 10,000 sessions — one message each, disposed as it goes — and exits; then
// a new process runs `dsh sessions --limit 50 --json`.
// Subject: that first listing, on a root just written (a fresh root for
// every sample; the writer is not timed). Baseline: a later listing of the
// same kind of root (its second, third, … listing). Ratio = subject /
// baseline, target <= 2: the writer leaves the index current as it exits
// (its last pass on close), so the first listing costs O(changes since that
// pass) — nothing to read from the logs — not a read of every log it wrote.
//
// The writer gives its newest sessions the earliest creation times, so the
// first page must be exactly its last 50 sessions: an index that missed the
// writer's last changes cannot pass by listing older ones (and answering
// them from the logs instead would cost what the ratio catches).
//
// Build first: `npx turbo run build --filter=@dsh/cli... --filter=@dsh/bench`.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { type BenchDefinition, benchRoot, median } from '../harness.js'

const SESSIONS = 10_000
const PAGE = 50
/** Sessions created (and disposed) at once by the writer. */
const WAVE = 64
const cli = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
const work = join(benchRoot, '.fixtures', 'first-listing-after-writer')

/** The writer process: creates `count` sessions through a host and exits (disposing the host). */
const WRITER = `
const { createHost } = await import('@dsh/host')
const [root, countArg, waveArg] = process.argv.slice(1)
const count = Number(countArg)
const wave = Number(waveArg)
const base = 1_800_000_000_000
const host = await createHost({ root })
for (let start = 0; start < count; start += wave) {
  const disposing = []
  for (let i = start; i < Math.min(count, start + wave); i++) {
    // Newest first in listing order: the i-th session created is the i-th from the top.
    const session = host.sessions.create({ id: 'w' + String(i).padStart(5, '0'), createdAt: base - i, cwd: '/work/p' + (i % 20) })
    session.append('user/message', { text: 'question number ' + i + ' about the listing' })
    disposing.push(host.sessions.dispose(session.id))
  }
  await Promise.all(disposing)
}
await host.dispose()
`

/** The ids the first page must hold: the writer's last `PAGE` sessions, newest first. */
const expectedPage = Array.from({ length: PAGE }, (_, k) => `w${String(SESSIONS - 1 - k).padStart(5, '0')}`)

function runProcess(args: readonly string[]): { ms: number; stdout: string } {
  const start = process.hrtime.bigint()
  // From the bench package, so that a script given with -e resolves its imports.
  const child = spawnSync(process.execPath, args, { cwd: benchRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (child.status !== 0)
    throw new Error(`first-listing-after-writer: '${args.slice(0, 2).join(' ')}' exited ${child.status}: ${child.stderr.slice(0, 2000)}`)
  return { ms, stdout: child.stdout }
}

let roots = 0
/** The root the baseline lists: the last one written (and listed once already). */
let listed: string | undefined
const writerMs: number[] = []

/** A fresh root written by a writer process (not timed here). */
function writeRoot(): string {
  const root = join(work, `root-${++roots}`)
  rmSync(root, { recursive: true, force: true })
  writerMs.push(runProcess(['--input-type=module', '-e', WRITER, root, String(SESSIONS), String(WAVE)]).ms)
  return root
}

/** `dsh sessions --limit 50 --json` on `root`, checked to be the writer's newest 50; its time. */
function listing(root: string): number {
  const { ms, stdout } = runProcess([cli, 'sessions', '--root', root, '--limit', String(PAGE), '--json'])
  const ids = (JSON.parse(stdout) as { sessions: Array<{ header: { id: string } }> }).sessions.map((r) => r.header.id)
  if (ids.join() !== expectedPage.join())
    throw new Error(
      `first-listing-after-writer: the listing of ${root} is not the writer's newest ${PAGE} sessions (got ${ids.slice(0, 3).join(', ')}, …)`,
    )
  return ms
}

const definition: BenchDefinition = {
  name: 'first-listing-after-writer',
  unit: 'ms per process',
  target: 2,
  compare: 'le',
  repeats: 5,
  setup() {
    if (!existsSync(cli))
      throw new Error(`first-listing-after-writer: ${cli} is missing; build the CLI first (npx turbo run build --filter=@dsh/cli...).`)
    rmSync(work, { recursive: true, force: true })
    mkdirSync(work, { recursive: true })
    const root = writeRoot()
    listing(root)
    listed = root
  },
  teardown() {
    rmSync(work, { recursive: true, force: true })
  },
  baseline: {
    label: `new process: a later dsh sessions --limit ${PAGE} --json on a root a writer left (${SESSIONS} sessions)`,
    run: () => listing(listed!),
  },
  subject: {
    label: `new process: the first dsh sessions --limit ${PAGE} --json after a writer process created ${SESSIONS} sessions`,
    run: () => {
      const root = writeRoot()
      const ms = listing(root)
      // Later baselines list this root again: its second listing and on.
      if (listed !== undefined) rmSync(listed, { recursive: true, force: true })
      listed = root
      return ms
    },
  },
  extra: () => ({
    sessions: SESSIONS,
    page: PAGE,
    writerWave: WAVE,
    writers: writerMs.length,
    writerMedianMs: Math.round(median(writerMs)),
  }),
}

export default definition
