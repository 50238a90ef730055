import { Context, type Logger } from '@dsh/context'
import { type Session, SessionStore } from '@dsh/session'
import { createProjectionRegistry, type ProjectionRegistry } from '@dsh/session-projection'
import type { ScriptedEvent } from '@dsh/session-projection/testing'
import { registerSessionStatsUnits, type SessionStats } from '../src/index.js'

export const T0 = 1_760_000_000_000

export interface Host {
  readonly sessions: SessionStore
  readonly projections: ProjectionRegistry
  readonly warnings: string[]
  /** Appends scripted events at their times (`time` is relative to T0; default: one ms after the previous). */
  play(session: Session, script: readonly ScriptedEvent[]): void
  stats(session: Session): SessionStats
}

/** A real context with a store, a projection registry and the two units registered; warnings collected. */
export function host(): Host {
  const warnings: string[] = []
  const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let now = T0
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => now, newId: () => `s${++n}` })
  ctx.provide('sessions', sessions)
  const projections = createProjectionRegistry(ctx)
  registerSessionStatsUnits(projections)
  return {
    sessions,
    projections,
    warnings,
    play(session, script) {
      for (const entry of script) {
        now = entry.time === undefined ? now + 1 : T0 + entry.time
        session.append(entry.type, entry.data)
      }
    },
    stats(session) {
      const value = projections.snapshot(session, ['sessionStats']).sessionStats
      if (value === undefined) throw new Error(`sessionStats is absent for ${session.id}`)
      return value
    },
  }
}

const at = (time: number, type: string, data: unknown): ScriptedEvent => ({ type, data, time })

/**
 * Two turns: the first in two named steps (step usage replaces message usage,
 * a tool round trip), the second without steps (message usage, a failing
 * tool, a message without usage), then a title and a compaction summary.
 */
export const TWO_TURNS: readonly ScriptedEvent[] = [
  at(1000, 'user/message', { text: 'Plan the release' }),
  at(1001, 'turn/start', { turn: 1 }),
  at(1002, 'step/start', { turn: 1, step: 0, provider: 'example-provider', model: 'example-model' }),
  at(1052, 'assistant/chunk', { turn: 1, index: 0, delta: 'Sure' }),
  at(1100, 'assistant/message', { turn: 1, text: 'Sure', usage: { input: 100, output: 20 } }),
  at(1101, 'tool/call', { turn: 1, callId: 'c1', name: 'read_file', arguments: { path: 'README.md' } }),
  at(1141, 'tool/result', { turn: 1, callId: 'c1', content: '# dsh' }),
  at(1142, 'step/end', { turn: 1, step: 0, usage: { input: 100, output: 20, cacheRead: 50, reasoning: 5 }, finish: 'tool-calls' }),
  at(1143, 'step/start', { turn: 1, step: 1, provider: 'example-provider', model: 'example-model' }),
  at(1163, 'assistant/chunk', { turn: 1, index: 1, delta: 'Done' }),
  at(1200, 'assistant/message', { turn: 1, text: 'Done' }),
  at(1201, 'step/end', { turn: 1, step: 1, usage: { input: 10, output: 5 }, finish: 'stop' }),
  at(1202, 'turn/end', { turn: 1, reason: 'completed' }),
  at(1203, 'session/title', { title: 'Release plan' }),
  at(1300, 'user/message', { text: 'go on' }),
  at(1301, 'turn/start', { turn: 2 }),
  at(1351, 'assistant/chunk', { turn: 2, index: 0, delta: 'ok' }),
  at(1400, 'assistant/message', { turn: 2, text: 'ok', usage: { input: 7, output: 3 } }),
  at(1401, 'tool/call', { turn: 2, callId: 'c2', name: 'ls', arguments: {} }),
  at(1411, 'tool/result', { turn: 2, callId: 'c2', content: 'boom', isError: true }),
  at(1450, 'assistant/message', { turn: 2, text: 'failed' }),
  at(1451, 'turn/end', { turn: 2, reason: 'completed' }),
  at(1460, 'compaction/summary', { provider: 'example-provider', model: 'example-model', usage: { inputTokens: 30, outputTokens: 10 } }),
]

/** The index of the first event of the second turn's user message (a fork cut at a turn boundary). */
export const SECOND_TURN = 14
