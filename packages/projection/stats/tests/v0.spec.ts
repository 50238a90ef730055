import { toDshEvent, type V0Event } from '@dsh/session-import-v0'
import { describe, expect, it } from 'vitest'
import { SKIP_REASONS } from '../src/index.js'
import { host } from './helpers.js'
import { V0_CHILD, V0_PARENT_EVENTS, V0_TURN } from './v0-events.js'

const NO_SKIPS = Object.fromEntries(SKIP_REASONS.map((reason) => [reason, 0]))

describe('imported v0 sessions', () => {
  it('the converter keeps steps, chunks it does not convert, titles and compactions under their own names', () => {
    expect(V0_TURN.events.map((event) => event.type)).toEqual([
      'turn/start',
      'user/message',
      'step/start',
      // Envelope extras (ignorable) on a kept type: the whole line is wrapped.
      'v0/event',
      'v0/assistant/chunk',
      'v0/assistant/chunk',
      'v0/assistant/chunk',
      'assistant/chunk',
      'v0/assistant/chunk',
      'v0/assistant/chunk',
      'assistant/message',
      'tool/call',
      'tool/result',
      'step/end',
      'turn/end',
      'session/title',
      'v0/event',
      'compaction/summary',
      'compaction/end',
    ])
  })

  it('fold: steps, the reasoning delta as first token, the harness usage record with its cache reads, the model from the message source', () => {
    const h = host()
    const session = h.sessions.restore(V0_TURN)
    expect(h.stats(session)).toEqual({
      inheritedEventCount: 0,
      turns: 1,
      steps: 1,
      turnMs: 133,
      modelMs: 98,
      toolMs: 30,
      firstToken: { count: 1, totalMs: 39, meanMs: 39 },
      tokens: { input: 620, output: 90, cacheRead: 64, cacheWrite: 0, reasoning: 0 },
      byModel: [
        {
          provider: 'deepseek',
          model: 'deepseek-chat',
          calls: 2,
          callsWithoutUsage: 0,
          tokens: { input: 620, output: 90, cacheRead: 64, cacheWrite: 0, reasoning: 0 },
        },
      ],
      tools: [{ name: 'read_file', calls: 1, errors: 0, ms: 30 }],
      toolCalls: 1,
      toolErrors: 0,
      compactions: 1,
      skipped: NO_SKIPS,
    })
    expect(h.projections.snapshot(session, ['sessionTitle']).sessionTitle).toEqual({
      title: 'Release plan',
      source: 'event',
      seq: 15,
      inherited: false,
    })
  })

  it('a kept event wrapped whole (its envelope has extras) folds like the bare one', () => {
    const bare = V0_TURN.events.map((event) => event.type)
    const wrappedAt = bare.indexOf('step/end')
    const titleAt = bare.indexOf('session/title')
    const rewrap = (i: number) => {
      const event = V0_PARENT_EVENTS[i] as V0Event
      return toDshEvent({ ...event, ignorable: true })
    }
    const events = V0_TURN.events.map((event, i) => (i === wrappedAt || i === titleAt ? rewrap(i) : event))
    expect(events[wrappedAt]?.type).toBe('v0/event')
    expect(events[titleAt]?.type).toBe('v0/event')
    const h = host()
    const plain = h.sessions.restore(V0_TURN)
    const wrapped = h.sessions.restore({ ...V0_TURN, header: { ...V0_TURN.header, id: 'wrapped' as never }, events })
    expect(h.stats(wrapped)).toEqual(h.stats(plain))
    expect(h.projections.snapshot(wrapped, ['sessionTitle'])).toEqual(h.projections.snapshot(plain, ['sessionTitle']))
  })

  it('an imported fork counts only its own turn and titles itself by its own prompt', () => {
    const h = host()
    const child = h.sessions.restore(V0_CHILD)
    expect(child.inheritedEventCount).toBe(V0_TURN.events.length)
    expect(h.stats(child)).toMatchObject({
      inheritedEventCount: V0_TURN.events.length,
      turns: 1,
      steps: 1,
      turnMs: 32,
      modelMs: 28,
      toolCalls: 0,
      compactions: 0,
      tokens: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      // The child's step reported no usage: its tokens (and so its cost) are unknown, not 0.
      byModel: [{ provider: 'deepseek', model: 'deepseek-chat', calls: 1, callsWithoutUsage: 1 }],
      skipped: NO_SKIPS,
    })
    expect(h.projections.snapshot(child, ['sessionTitle']).sessionTitle).toEqual({
      title: 'Do the task.',
      source: 'prompt',
      seq: V0_TURN.events.length + 1,
      inherited: false,
    })
  })
})
