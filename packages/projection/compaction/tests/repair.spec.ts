import { type JsonValue, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { interruptedCompactionEnds } from '../src/index.js'

const log = (...items: Array<[string, JsonValue]>): StoredSessionEvent[] =>
  items.map(([type, data], seq) => ({ type, seq: SessionSeq(seq), time: seq, data }))

/** The rule as its documentation states it, with a list of open compactions searched at each end: the oracle for small logs. */
function openByRule(events: readonly StoredSessionEvent[]): (string | null)[] {
  const open: (string | null)[] = []
  for (const event of events) {
    if (event.type !== 'compaction/start' && event.type !== 'compaction/end') continue
    const id = (event.data as { compactionId?: unknown } | null)?.compactionId
    const key = typeof id === 'string' ? id : null
    if (event.type === 'compaction/start') open.push(key)
    else {
      const at = key === null ? open.length - 1 : open.lastIndexOf(key)
      if (at >= 0) open.splice(at, 1)
    }
  }
  return open
}

const repairsOf = (events: readonly StoredSessionEvent[], open: readonly (string | null)[], time: number) =>
  open.map((id, i) => ({
    type: 'compaction/end',
    seq: events.length + i,
    time,
    data: id === null ? { error: 'interrupted' } : { compactionId: id, error: 'interrupted' },
  }))

describe('interruptedCompactionEnds', () => {
  it('is empty when every compaction ended (with or without error)', () => {
    expect(interruptedCompactionEnds([], 1)).toEqual([])
    const events = log(
      ['compaction/start', { compactionId: 'a' }],
      ['compaction/end', { compactionId: 'a' }],
      ['compaction/start', {}],
      ['compaction/end', { error: 'boom' }],
    )
    expect(interruptedCompactionEnds(events, 1)).toEqual([])
  })

  it('closes each open compaction in start order, by id, after the last event', () => {
    const events = log(
      ['compaction/start', { compactionId: 'a' }],
      ['compaction/start', { compactionId: 'b' }],
      ['compaction/summary', { compactionId: 'b', summary: [] }],
      ['compaction/end', { compactionId: 'b' }],
      ['compaction/start', {}],
    )
    const repairs = interruptedCompactionEnds(events, 9)
    expect(repairs).toEqual([
      { type: 'compaction/end', seq: 5, time: 9, data: { compactionId: 'a', error: 'interrupted' } },
      { type: 'compaction/end', seq: 6, time: 9, data: { error: 'interrupted' } },
    ])
    expect(repairs.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
    expect(interruptedCompactionEnds([...events, ...repairs], 9)).toEqual([])
  })

  it('closes what the rule closes on random logs: repeated ids, ends without an id or with a non-string one, unmatched ends', () => {
    const random = prng(11)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T
    const ids: JsonValue[] = ['a', 'b', 'c', 'd', 7, null]
    for (let round = 0; round < 500; round++) {
      const items: Array<[string, JsonValue]> = []
      const length = 1 + Math.floor(random() * 40)
      for (let i = 0; i < length; i++) {
        const type = pick([
          'compaction/start',
          'compaction/start',
          'compaction/end',
          'compaction/end',
          'compaction/summary',
          'user/message',
        ])
        const r = random()
        const data: JsonValue = r < 0.15 ? {} : r < 0.2 ? null : { compactionId: pick(ids) }
        items.push([type, data])
      }
      const events = log(...items)
      expect(interruptedCompactionEnds(events, 3)).toEqual(repairsOf(events, openByRule(events), 3))
    }
  })

  it('matches 500,000 ends to their starts in one pass: each end names the oldest compaction still open', () => {
    // No work counter: the function is pure. The size is the bound instead: a
    // search of the open compactions at each end (and a removal from the front
    // of that list) is about 10^11 steps here, so such a rule runs for minutes
    // and fails on the test timeout.
    const n = 500_000
    const ids = Array.from({ length: n }, (_, i) => `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`)
    const events: StoredSessionEvent[] = []
    const at = (type: string, data: JsonValue) => events.push({ type, seq: SessionSeq(events.length), time: 0, data })
    for (const id of ids) at('compaction/start', { compactionId: id })
    at('compaction/start', {})
    // Every thousandth compaction never ends; an end without an id closes the newest (the one without an id).
    for (let i = 0; i < n; i++) if (i % 1000 !== 999) at('compaction/end', { compactionId: ids[i] as string })
    at('compaction/end', {})
    const open = ids.filter((_, i) => i % 1000 === 999)
    expect(interruptedCompactionEnds(events, 5)).toEqual(repairsOf(events, open, 5))
  })
})
