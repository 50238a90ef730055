// telemetry-append: `session.append` through `createHost` with the
// OpenTelemetry plugin activated and no exporter configured, against the same
// host without the plugin. Ratio = subject / baseline; target <= 1.05:
// telemetry that is not exported must cost nothing measurable on the append
// path (the plugin then registers no listener at all).
//
// Paired: each round appends to both hosts' sessions, alternating in groups
// of GROUP appends (which side goes first alternates too), each group timed
// alone, so both sides see the same machine from one microsecond to the next.
// Persistence writes behind; both sessions are flushed between rounds,
// outside the timed groups.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import type { Session } from '@dsh/session'
import { sessionTelemetryPlugin } from '@dsh/session-telemetry-otel'
import type { BenchDefinition } from '../harness.js'

/** Appends per side per sample. */
const APPENDS = 4000
const GROUP = 20

let dir = ''
let plain: Host | undefined
let traced: Host | undefined
let plainSession: Session | undefined
let tracedSession: Session | undefined
let index = 0
/** The subject's half of the round the baseline side last ran (the harness asks for baseline, then subject). */
let pendingSubject: number | undefined

function appendGroup(session: Session): bigint {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < GROUP; i++) {
    const n = index + i
    session.append('assistant/chunk', { turn: 1, index: n, delta: `chunk ${n} of a streamed answer: the quick brown fox` })
  }
  return process.hrtime.bigint() - t0
}

async function pairedRound(): Promise<{ baseline: number; subject: number }> {
  let baseline = 0n
  let subject = 0n
  for (let g = 0; g < APPENDS / GROUP; g++) {
    if (g % 2 === 0) {
      baseline += appendGroup(plainSession!)
      subject += appendGroup(tracedSession!)
    } else {
      subject += appendGroup(tracedSession!)
      baseline += appendGroup(plainSession!)
    }
    index += GROUP
  }
  await Promise.all([plain!.sessions.flush(plainSession!), traced!.sessions.flush(tracedSession!)])
  return { baseline: Number(baseline) / 1e6, subject: Number(subject) / 1e6 }
}

const definition: BenchDefinition = {
  name: 'telemetry-append',
  unit: 'ms',
  target: 1.05,
  compare: 'le',
  repeats: 9,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-telemetry-'))
    plain = await createHost({ root: join(dir, 'plain') })
    traced = await createHost({ root: join(dir, 'traced') })
    await traced.ctx.activate(sessionTelemetryPlugin())
    plainSession = plain.sessions.create({ id: 'bench-plain' })
    tracedSession = traced.sessions.create({ id: 'bench-traced' })
    plainSession.append('turn/start', { turn: 1 })
    tracedSession.append('turn/start', { turn: 1 })
  },
  async teardown() {
    await plain?.dispose()
    await traced?.dispose()
    rmSync(dir, { recursive: true, force: true })
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
