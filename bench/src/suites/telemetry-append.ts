// telemetry-append: `session.append` through `createHost` with the
// OpenTelemetry plugin activated and no exporter configured, against the same
// host without the plugin. Ratio = subject / baseline; target <= 1.05:
// telemetry that is not exported must cost nothing measurable on the append
// path (the plugin then registers no listener at all).
//
// Paired: each round appends to a fresh session on each host, alternating in
// groups of GROUP appends (which side goes first alternates too), each group
// timed alone, so both sides see the same machine from one microsecond to
// the next. A sample is the round's time per APPENDS appends from the mean
// group time with the slowest tenth of each side's groups left out: a
// garbage collection or another process on this shared machine lands in one
// group of one side at random and would otherwise decide a round. The plain
// sums are reported under `extra`. Persistence writes behind; the round's
// sessions are flushed and taken out of memory between rounds, outside the
// timed groups. Untimed warm-up rounds come first.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import type { Session } from '@dsh/session'
import { sessionTelemetryPlugin } from '@dsh/session-telemetry-otel'
import { type BenchDefinition, median } from '../harness.js'

/** Appends per side per sample. */
const APPENDS = 10_000
const GROUP = 50
/** Untimed rounds first, so both sides run compiled code before any sample. */
const WARM_UP_ROUNDS = 3

let dir = ''
let plain: Host | undefined
let traced: Host | undefined
let index = 0
let round = 0
/** The subject's half of the round the baseline side last ran (the harness asks for baseline, then subject). */
let pendingSubject: number | undefined
const sums = { baseline: [] as number[], subject: [] as number[] }

function appendGroup(session: Session): number {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < GROUP; i++) {
    const n = index + i
    session.append('assistant/chunk', { turn: 1, index: n, delta: `chunk ${n} of a streamed answer: the quick brown fox` })
  }
  return Number(process.hrtime.bigint() - t0) / 1e6
}

/** ms per APPENDS appends from the mean group time without the slowest tenth. */
function trimmed(groups: number[]): number {
  const kept = [...groups].sort((a, b) => a - b).slice(0, Math.ceil(groups.length * 0.9))
  return (kept.reduce((sum, ms) => sum + ms, 0) / kept.length) * (APPENDS / GROUP)
}

async function pairedRound(): Promise<{ baseline: number; subject: number }> {
  round++
  const sessions = [plain!, traced!].map((host) => host.sessions.create({ id: `bench-${round}` }))
  const [plainSession, tracedSession] = sessions as [Session, Session]
  plainSession.append('turn/start', { turn: 1 })
  tracedSession.append('turn/start', { turn: 1 })
  const baseline: number[] = []
  const subject: number[] = []
  for (let g = 0; g < APPENDS / GROUP; g++) {
    if (g % 2 === 0) {
      baseline.push(appendGroup(plainSession))
      subject.push(appendGroup(tracedSession))
    } else {
      subject.push(appendGroup(tracedSession))
      baseline.push(appendGroup(plainSession))
    }
    index += GROUP
  }
  await Promise.all([plain!.sessions.dispose(plainSession.id), traced!.sessions.dispose(tracedSession.id)])
  sums.baseline.push(baseline.reduce((a, b) => a + b, 0))
  sums.subject.push(subject.reduce((a, b) => a + b, 0))
  return { baseline: trimmed(baseline), subject: trimmed(subject) }
}

const definition: BenchDefinition = {
  name: 'telemetry-append',
  unit: 'ms',
  target: 1.05,
  compare: 'le',
  repeats: 15,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-telemetry-'))
    plain = await createHost({ root: join(dir, 'plain') })
    traced = await createHost({ root: join(dir, 'traced') })
    await traced.ctx.activate(sessionTelemetryPlugin())
    for (let i = 0; i < WARM_UP_ROUNDS; i++) await pairedRound()
    sums.baseline.length = 0
    sums.subject.length = 0
  },
  async teardown() {
    await plain?.dispose()
    await traced?.dispose()
    rmSync(dir, { recursive: true, force: true })
  },
  extra() {
    const baseline = median(sums.baseline)
    const subject = median(sums.subject)
    return { untrimmedMedianMs: { baseline, subject }, untrimmedRatio: baseline === 0 ? null : Number((subject / baseline).toFixed(3)) }
  },
  baseline: {
    label: `${APPENDS} appends, host without the plugin`,
    async run() {
      const round = await pairedRound()
      pendingSubject = round.subject
      return round.baseline
    },
  },
  subject: {
    label: `${APPENDS} appends, host with the plugin (no exporter)`,
    run() {
      const subject = pendingSubject!
      pendingSubject = undefined
      return subject
    },
  },
}

export default definition
