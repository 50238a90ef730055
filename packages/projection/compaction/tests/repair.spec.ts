import { type JsonValue, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { interruptedCompactionEnds } from '../src/index.js'

const log = (...items: Array<[string, JsonValue]>): StoredSessionEvent[] =>
  items.map(([type, data], seq) => ({ type, seq: SessionSeq(seq), time: seq, data }))

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
})
