// show-tail: `dsh show <id> --limit 20 --json` of a session whose transcript
// is 100 MiB of plaintext against the same command for a 1 MiB one, each a
// whole new process over a root without an index (as a read-only command
// finds a root nobody indexed), with the realistic event mix and one durable
// batch per turn. A read costs what it shows: the last 20 events are found by
// walking the log's batch trailers back from its end, so the 100 MiB session
// costs about what the 1 MiB one does. Ratio = subject / baseline; target
// <= 2, and the 100 MiB process's peak RSS (VmHWM, read at its exit) at most
// 100 MiB. `extra` reports both processes' peak RSS and the bytes a tail read
// of each log takes (in process, from the backend's metrics).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { realisticTurns } from '@dsh/test-kit'
import { persistTurns } from '../fixtures/transcript.js'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const bin = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
const preload = join(benchRoot, 'dist', 'fixtures', 'peak-rss.js')
const LIMIT = 20
const MiB = 1024 * 1024
/** The subject's peak RSS bound, in MiB. */
const MAX_PEAK_RSS_MIB = 100
/** Processes per sample, so one sample is long enough to time. */
const PROCESSES = 3

interface Side {
  readonly id: string
  readonly plaintextBytes: number
  events: number
  logBytes: number
  tailBytesRead: number
  readonly peakRssKib: number[]
}

const small: Side = { id: 'tail-1mib', plaintextBytes: 1 * MiB, events: 0, logBytes: 0, tailBytesRead: 0, peakRssKib: [] }
const large: Side = { id: 'tail-100mib', plaintextBytes: 100 * MiB, events: 0, logBytes: 0, tailBytesRead: 0, peakRssKib: [] }
let root = ''

/** Runs one `dsh show --limit 20 --json` process, checks its page and records its peak RSS. */
function show(side: Side): void {
  const result = spawnSync(
    process.execPath,
    ['--import', preload, bin, 'show', side.id, '--limit', String(LIMIT), '--json', '--root', root],
    { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 16 * MiB },
  )
  const stderr = result.stderr.toString()
  if (result.status !== 0) throw new Error(`dsh show ${side.id} exited ${String(result.status)}: ${stderr}`)
  const page = JSON.parse(result.stdout.toString()) as { total: number; events: Array<{ seq: number }> }
  const seqs = page.events.map((e) => e.seq)
  if (page.total !== side.events || seqs.length !== LIMIT || seqs[0] !== side.events - LIMIT || seqs.at(-1) !== side.events - 1)
    throw new Error(`dsh show ${side.id} printed ${seqs.length} events of ${page.total}, not the last ${LIMIT} of ${side.events}`)
  const kib = Number(/peak-rss-kib (\d+)/.exec(stderr)?.[1])
  if (!Number.isFinite(kib)) throw new Error(`dsh show ${side.id} reported no peak RSS (needs /proc): ${stderr}`)
  side.peakRssKib.push(kib)
}

function runProcesses(side: Side): () => Promise<number> {
  return () =>
    time(() => {
      for (let i = 0; i < PROCESSES; i++) show(side)
    })
}

/** Persists the side's transcript and measures, in process, the bytes a tail read of it takes. */
async function prepare(side: Side): Promise<void> {
  const turns = realisticTurns(side.plaintextBytes)
  side.events = turns.reduce((n, t) => n + t.length, 0)
  side.logBytes = statSync(await persistTurns(root, side.id, turns)).size
  const persistence = createJsonlPersistence({ root, readOnly: true })
  try {
    const tail = await persistence.inspectRange(SessionId(side.id), { limit: LIMIT })
    if (tail.events.length !== LIMIT) throw new Error(`the tail of ${side.id} holds ${tail.events.length} events`)
    side.tailBytesRead = persistence.metrics.bytesRead
  } finally {
    await persistence.close()
  }
}

const maxMiB = (side: Side): number => +(Math.max(...side.peakRssKib) / 1024).toFixed(1)

const definition: BenchDefinition = {
  name: 'show-tail',
  unit: `ms per ${PROCESSES} processes`,
  target: 2,
  compare: 'le',
  repeats: 7,
  async setup() {
    for (const file of [bin, preload])
      if (!existsSync(file))
        throw new Error(`${file} is missing; build first (turbo run build --filter=@dsh/cli... --filter=@dsh/bench...).`)
    root = mkdtempSync(join(tmpdir(), 'dsh-bench-show-tail-'))
    await prepare(small)
    await prepare(large)
  },
  teardown() {
    rmSync(root, { recursive: true, force: true })
  },
  baseline: { label: `dsh show --limit ${LIMIT} --json, 1 MiB session`, run: runProcesses(small) },
  subject: { label: `dsh show --limit ${LIMIT} --json, 100 MiB session`, run: runProcesses(large) },
  extra() {
    const figures = (side: Side) => ({
      plaintextMiB: +(side.plaintextBytes / MiB).toFixed(1),
      logMiB: +(side.logBytes / MiB).toFixed(2),
      events: side.events,
      tailBytesRead: side.tailBytesRead,
      peakRssMiB: maxMiB(side),
    })
    return {
      baseline: figures(small),
      subject: figures(large),
      maxPeakRssMiB: MAX_PEAK_RSS_MIB,
      note: 'peakRssMiB: the largest VmHWM of the side’s processes; tailBytesRead: bytes a fresh backend read for the last 20 events',
    }
  },
  requirements() {
    return { [`peak RSS of the 100 MiB process <= ${MAX_PEAK_RSS_MIB} MiB`]: maxMiB(large) <= MAX_PEAK_RSS_MIB }
  },
}

export default definition
