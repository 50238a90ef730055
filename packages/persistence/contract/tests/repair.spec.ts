import { type JsonValue, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { interruptedTurnEnds, SessionRepairs } from '../src/backend.js'

function log(...items: Array<[string, JsonValue]>): StoredSessionEvent[] {
  return items.map(([type, data], seq) => ({ type, seq: SessionSeq(seq), time: seq, data }))
}

describe('interruptedTurnEnds', () => {
  it('is empty for a log whose turns all ended', () => {
    expect(interruptedTurnEnds(log(['turn/start', { turn: 1 }], ['turn/end', { turn: 1, reason: 'completed' }]), 9)).toEqual([])
    expect(interruptedTurnEnds([], 9)).toEqual([])
  })

  it('closes every open turn in start order, after the last event', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['turn/end', { turn: 1, reason: 'completed' }],
      ['turn/start', { turn: 2 }],
      ['turn/start', { turn: 3 }],
      ['assistant/chunk', { turn: 3, index: 0, delta: 'x' }],
    )
    const repairs = interruptedTurnEnds(events, 77)
    expect(repairs).toEqual([
      { type: 'turn/end', seq: 5, time: 77, data: { turn: 2, reason: 'interrupted' } },
      { type: 'turn/end', seq: 6, time: 77, data: { turn: 3, reason: 'interrupted' } },
    ])
    expect(repairs.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
  })

  it('ignores events whose turn is not a number', () => {
    expect(interruptedTurnEnds(log(['turn/start', { turn: '1' }], ['turn/start', null], ['turn/start', [1]]), 1)).toEqual([])
  })
})

describe('SessionRepairs', () => {
  it('runs the built-in rule first, then registered rules in order, each seeing the repairs before it', () => {
    const repairs = new SessionRepairs()
    const seen: number[] = []
    const close = (type: string) => (events: readonly StoredSessionEvent[], time: number) => {
      seen.push(events.length)
      return [{ type, seq: SessionSeq(events.length), time, data: null }]
    }
    repairs.register(close('a/end'))
    const unregister = repairs.register(close('b/end'))
    const events = log(['turn/start', { turn: 1 }])
    expect(repairs.eventsFor(events, 5).map((e) => [e.type, e.seq])).toEqual([
      ['turn/end', 1],
      ['a/end', 2],
      ['b/end', 3],
    ])
    expect(seen).toEqual([2, 3])
    unregister()
    expect(repairs.eventsFor([], 5).map((e) => e.type)).toEqual(['a/end'])
  })
})
