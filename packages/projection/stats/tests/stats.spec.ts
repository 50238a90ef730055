import type { StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  costOf,
  MAX_PENDING_CALLS,
  parsePriceTable,
  type SessionStats,
  type SessionStatsState,
  SKIP_REASONS,
  sessionStatsUnit,
} from '../src/index.js'
import { host, SECOND_TURN, T0, TWO_TURNS } from './helpers.js'

const NO_SKIPS = Object.fromEntries(SKIP_REASONS.map((reason) => [reason, 0]))
const NO_TOKENS_OF = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 }

/** A detached fold of bare events through the unit (no registry). */
function fold(events: readonly Omit<StoredSessionEvent, 'seq' | 'time'>[], cut = 0): SessionStats {
  let state = sessionStatsUnit.init({ inheritedEventCount: cut as never })
  events.forEach((event, seq) => {
    state = sessionStatsUnit.apply(state, { ...event, seq: seq as never, time: T0 + seq })
  })
  return sessionStatsUnit.view(state)
}

describe('sessionStats', () => {
  it('counts turns, steps, wall times, first-token latency, tokens by model and kind, tools and errors', () => {
    const h = host()
    const session = h.sessions.create()
    h.play(session, TWO_TURNS)
    expect(h.stats(session)).toEqual({
      inheritedEventCount: 0,
      turns: 2,
      steps: 2,
      turnMs: 201 + 150,
      // step 0: 1002→1100; step 1: 1143→1200; turn 2: 1301→1400 and tool result 1411→1450.
      modelMs: 98 + 57 + 99 + 39,
      toolMs: 40 + 10,
      firstToken: { count: 3, totalMs: 50 + 20 + 50, meanMs: 40 },
      tokens: { input: 147, output: 38, cacheRead: 50, cacheWrite: 0, reasoning: 5 },
      byModel: [
        // Step 0's message usage (100/20) was replaced by the step's own (which adds cacheRead and reasoning); plus the compaction.
        {
          provider: 'example-provider',
          model: 'example-model',
          calls: 3,
          callsWithoutUsage: 0,
          tokens: { input: 140, output: 35, cacheRead: 50, cacheWrite: 0, reasoning: 5 },
        },
        // Turn 2 ran without steps: two messages, one without usage, no model named.
        {
          provider: null,
          model: null,
          calls: 2,
          callsWithoutUsage: 1,
          tokens: { input: 7, output: 3, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
        },
      ],
      tools: [
        { name: 'read_file', calls: 1, errors: 0, ms: 40 },
        { name: 'ls', calls: 1, errors: 1, ms: 10 },
      ],
      toolCalls: 2,
      toolErrors: 1,
      compactions: 1,
      skipped: NO_SKIPS,
    })
    expect(h.warnings).toEqual([])
  })

  it('a fork counts only its own suffix; the parent is unchanged and a detached fold agrees', () => {
    const h = host()
    const parent = h.sessions.create()
    h.play(parent, TWO_TURNS.slice(0, SECOND_TURN))
    const child = h.sessions.fork(parent)
    expect(child.inheritedEventCount).toBe(SECOND_TURN)
    h.play(child, TWO_TURNS.slice(SECOND_TURN))
    h.play(parent, TWO_TURNS.slice(SECOND_TURN))
    const own = h.stats(child)
    expect(own).toMatchObject({
      inheritedEventCount: SECOND_TURN,
      turns: 1,
      steps: 0,
      turnMs: 150,
      toolCalls: 1,
      toolErrors: 1,
      compactions: 1,
      tokens: { input: 37, output: 13, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      skipped: NO_SKIPS,
    })
    expect(h.stats(parent)).toMatchObject({ inheritedEventCount: 0, turns: 2, steps: 2, toolCalls: 2 })
    expect(h.projections.fold(child.events, { inheritedEventCount: child.inheritedEventCount }, ['sessionStats'])).toEqual({
      sessionStats: own,
    })
    // The same events with no cut count the inherited turn too.
    expect(h.projections.fold(child.events, { inheritedEventCount: 0 as never }, ['sessionStats']).sessionStats).toEqual(h.stats(parent))
    // A checkpoint revives the fork's own figures without knowing the cut.
    const rows = JSON.parse(JSON.stringify(h.projections.checkpoint(child, ['sessionStats'])))
    expect(h.projections.viewCheckpoint(rows, ['sessionStats'])).toEqual({ sessionStats: own })
  })

  it('bad usage is counted and ignored, never thrown; the call is then a call without usage', () => {
    const stats = fold([
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'assistant/message', data: { turn: 1, text: 'a', usage: { input: -1, output: 2 } } },
      { type: 'assistant/message', data: { turn: 1, text: 'b', usage: { input: 1.5, output: 2 } } },
      { type: 'assistant/message', data: { turn: 1, text: 'c', usage: 'lots' } },
      { type: 'assistant/message', data: { turn: 1, text: 'd', usage: { input: 3 } } },
      { type: 'assistant/message', data: { turn: 1, text: 'e', usage: { input: 4, output: 1, cacheRead: null } } },
      { type: 'assistant/message', data: { turn: 1, text: 'f', usage: { input: 9, output: 1 } } },
      { type: 'step/start', data: { turn: 1, step: 0, provider: 'p', model: 42 } },
      { type: 'assistant/message', data: { turn: 1, text: 'g', usage: { input: 5, output: 5 } } },
      // The step's own usage is invalid: the message's stands.
      { type: 'step/end', data: { turn: 1, step: 0, usage: { input: 1, output: -5 } } },
      { type: 'tool/call', data: { turn: 1, name: 'no-call-id', arguments: {} } },
      { type: 'tool/result', data: { turn: 1, callId: 'never-called', content: 'x' } },
      { type: 'tool/call', data: { turn: 1, callId: 'c', name: 'ls', arguments: {} } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
      { type: 'turn/start', data: { turn: 'two' } },
    ])
    expect(stats.skipped).toEqual({
      ...NO_SKIPS,
      'invalid-usage': 6,
      'invalid-event': 3,
      'unmatched-tool-result': 1,
      'unanswered-tool-call': 1,
      'unmatched-turn-end': 1,
    })
    expect(stats.byModel).toEqual([
      {
        provider: null,
        model: null,
        calls: 6,
        callsWithoutUsage: 5,
        tokens: { input: 9, output: 1, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      },
      // model 42 is not a model name: the provider alone is kept.
      {
        provider: 'p',
        model: null,
        calls: 1,
        callsWithoutUsage: 0,
        tokens: { input: 5, output: 5, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      },
    ])
    expect(stats.turns).toBe(1)
    expect(stats.tools).toEqual([{ name: 'ls', calls: 1, errors: 0, ms: 0 }])
  })

  it('the state is bounded: calls that never get a result are dropped as unanswered beyond MAX_PENDING_CALLS', () => {
    const calls = Array.from({ length: MAX_PENDING_CALLS + 10 }, (_, i) => ({
      type: 'tool/call',
      data: { turn: 1, callId: `c${i}`, name: 'ls', arguments: {} },
    }))
    const stats = fold([
      ...calls,
      { type: 'tool/result', data: { turn: 1, callId: 'c0', content: '' } },
      { type: 'tool/result', data: { turn: 1, callId: `c${MAX_PENDING_CALLS + 9}`, content: '' } },
    ])
    expect(stats.skipped).toEqual({ ...NO_SKIPS, 'unanswered-tool-call': 10, 'unmatched-tool-result': 1 })
    // The last call (seq 265) got its result two events later; the first call's result found no pending call.
    expect(stats.tools).toEqual([{ name: 'ls', calls: MAX_PENDING_CALLS + 10, errors: 0, ms: 2 }])
  })

  it('times that are not finite or run backwards are counted, not summed', () => {
    let state = sessionStatsUnit.init({ inheritedEventCount: 0 as never })
    const events: Array<[string, unknown, number]> = [
      ['turn/start', { turn: 1 }, Number.NaN],
      ['assistant/chunk', { turn: 1, index: 0, delta: 'x' }, 10],
      ['assistant/message', { turn: 1, text: 'x' }, 20],
      ['tool/call', { turn: 1, callId: 'c', name: 'ls', arguments: {} }, 30],
      ['tool/result', { turn: 1, callId: 'c', content: '' }, 25],
      ['turn/end', { turn: 1, reason: 'completed' }, 40],
    ]
    events.forEach(([type, data, time], seq) => {
      state = sessionStatsUnit.apply(state, { type, data: data as never, seq: seq as never, time })
    })
    expect(sessionStatsUnit.schema.safeParse(JSON.parse(JSON.stringify(state))).success).toBe(true)
    const stats = sessionStatsUnit.view(state)
    expect(stats).toMatchObject({ turnMs: 0, modelMs: 0, toolMs: 0, firstToken: { count: 0, totalMs: 0, meanMs: null } })
    expect(stats.skipped['invalid-time']).toBe(4)
  })

  it('apply returns the same state for events that change nothing, and for the inherited prefix', () => {
    const state = sessionStatsUnit.init({ inheritedEventCount: 2 as never })
    const turn = { type: 'turn/start', seq: 1 as never, time: T0, data: { turn: 1 } }
    expect(sessionStatsUnit.apply(state, turn)).toBe(state)
    const open = sessionStatsUnit.apply(state, { ...turn, seq: 2 as never })
    expect(open).not.toBe(state)
    for (const [type, data] of [
      ['user/message', { text: 'outside a turn is nothing' }],
      ['assistant/chunk', { turn: 1, index: 0, delta: '' }],
      ['request/header', {}],
      ['compaction/start', { reason: 'size' }],
    ] as const) {
      const idle = sessionStatsUnit.apply(state, { type, seq: 3 as never, time: T0, data })
      expect(idle).toBe(state)
    }
    const chunk = { type: 'assistant/chunk', seq: 3 as never, time: T0 + 5, data: { turn: 1, index: 0, delta: 'a' } }
    const first = sessionStatsUnit.apply(open, chunk)
    expect(first).not.toBe(open)
    // Only the first token of a segment counts.
    expect(sessionStatsUnit.apply(first, { ...chunk, seq: 4 as never })).toBe(first)
  })
})

describe('sessionStats: a driver’s assistant/message', () => {
  it('is one call attributed to the provider and model it names, with disjoint usage', () => {
    const h = host()
    const session = h.sessions.create()
    h.play(session, [
      { type: 'turn/start', data: { turn: 1 } },
      {
        type: 'assistant/message',
        data: { turn: 1, text: 'hi', usage: { input: 8, output: 3, cacheRead: 4, reasoning: 2 }, provider: 'api.example.com', model: 'm1' },
      },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ])
    expect(h.stats(session).byModel).toEqual([
      {
        provider: 'api.example.com',
        model: 'm1',
        calls: 1,
        callsWithoutUsage: 0,
        tokens: { input: 8, output: 3, cacheRead: 4, cacheWrite: 0, reasoning: 2 },
      },
    ])
  })
})

describe('sessionStats: a step without its step/end', () => {
  // A child killed mid model call: its log ends inside the step.
  const CUT_OFF = [
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'step/start', data: { turn: 1, step: 0, provider: 'p', model: 'm' } },
    { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'Wor' } },
    { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'king' } },
  ] as const
  const ENDED = [
    { type: 'assistant/message', data: { turn: 1, text: 'Working' } },
    { type: 'step/end', data: { turn: 1, step: 0, usage: { input: 10, output: 4 }, finish: 'stop' } },
    { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  ] as const
  const NO_USAGE = { provider: 'p', model: 'm', calls: 1, callsWithoutUsage: 1, tokens: { ...NO_TOKENS_OF } }

  /** The unit's state after `events` from seq `from` on, read back through a checkpoint (JSON and the unit's schema). */
  function checkpointed(state: SessionStatsState, events: readonly { type: string; data: unknown }[], from: number): SessionStatsState {
    for (const [i, event] of events.entries())
      state = sessionStatsUnit.apply(state, { ...event, data: event.data as never, seq: (from + i) as never, time: T0 + from + i })
    const parsed = sessionStatsUnit.schema.safeParse(JSON.parse(JSON.stringify(state)))
    if (!parsed.success) throw new Error('the checkpointed state fails its schema')
    return parsed.data
  }

  it('is one call without usage, live or cut off, so its tokens are not taken for 0', () => {
    const stats = fold(CUT_OFF)
    expect(stats.byModel).toEqual([NO_USAGE])
    expect(stats).toMatchObject({ steps: 0, tokens: NO_TOKENS_OF })
    // The messages of an open step that reported usage count as closing it without its own would.
    const reported = fold([...CUT_OFF, { type: 'assistant/message', data: { turn: 1, text: 'x', usage: { input: 3, output: 1 } } }])
    expect(reported.byModel).toEqual([{ ...NO_USAGE, callsWithoutUsage: 0, tokens: { ...NO_TOKENS_OF, input: 3, output: 1 } }])
  })

  it('a checkpoint taken inside the step closes later as the straight fold does, without counting the call twice', () => {
    const open = checkpointed(sessionStatsUnit.init({ inheritedEventCount: 0 as never }), CUT_OFF, 0)
    expect(open.step).not.toBeNull()
    expect(sessionStatsUnit.view(open).byModel).toEqual([NO_USAGE])
    // The step ends with its usage: one call, its own usage.
    const ended = checkpointed(open, ENDED, CUT_OFF.length)
    expect(sessionStatsUnit.view(ended)).toEqual(fold([...CUT_OFF, ...ENDED]))
    expect(sessionStatsUnit.view(ended).byModel).toEqual([
      { provider: 'p', model: 'm', calls: 1, callsWithoutUsage: 0, tokens: { ...NO_TOKENS_OF, input: 10, output: 4 } },
    ])
    // A resume starts the next turn instead: the step closes without usage, still one call.
    const resumed = checkpointed(open, [{ type: 'turn/start', data: { turn: 2 } }], CUT_OFF.length)
    expect(resumed.step).toBeNull()
    expect(sessionStatsUnit.view(resumed).byModel).toEqual([NO_USAGE])
  })

  it('prices as usage-not-recorded, never $0', async () => {
    const table = await parsePriceTable({ currency: 'USD', providers: { p: { m: { input: 1, output: 1 } } } })
    expect(costOf(fold(CUT_OFF), table)).toEqual({
      usd: null,
      reason: 'usage-not-recorded',
      byModel: [{ provider: 'p', model: 'm', usd: null, reason: 'usage-not-recorded' }],
      pricedUsd: 0,
    })
    expect(costOf(fold([...CUT_OFF, ...ENDED]), table).usd).toBeCloseTo(14 / 1e6, 15)
  })
})
