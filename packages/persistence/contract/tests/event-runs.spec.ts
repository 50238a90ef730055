import { parseSessionHeader, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  type AppendedEvent,
  appendedEventCount,
  createMemoryPersistence,
  expandEventRuns,
  isEventRun,
  type StoredEventRun,
} from '../src/index.js'

describe('event runs', () => {
  it('runs the README example: a run is stored and read back as its events', async () => {
    const p = createMemoryPersistence()
    const header = parseSessionHeader({ version: 1, id: 'runs', createdAt: 0, isSeeded: false, delegationDepth: 0 })
    const run: StoredEventRun = {
      type: 'assistant/chunk',
      seq: SessionSeq(0),
      time: 1000,
      run: { dt: [5, 7], data: { turn: 1, delta: ['He', 'll', 'o'] } },
    }
    await p.append({ header, inheritedEventCount: SessionLogOffset(0) }, [run])
    expect((await p.inspect(header.id)).events).toEqual([
      { type: 'assistant/chunk', seq: 0, time: 1000, data: { turn: 1, delta: 'He' } },
      { type: 'assistant/chunk', seq: 1, time: 1005, data: { turn: 1, delta: 'll' } },
      { type: 'assistant/chunk', seq: 2, time: 1012, data: { turn: 1, delta: 'o' } },
    ])
    expect(expandEventRuns('runs', [run])).toHaveLength(3)
  })

  it('counts and expands a batch of events and runs; a batch without runs is returned as it is', () => {
    const event = (seq: number): StoredSessionEvent => Object.freeze({ type: 'e', seq: SessionSeq(seq), time: seq, data: null })
    const run: StoredEventRun = {
      type: 'r',
      seq: SessionSeq(1),
      time: 10,
      run: { dt: [0, 1, 2], data: { k: ['a', 'b', 'c', 'd'], same: true } },
    }
    const batch: AppendedEvent[] = [event(0), run, event(5)]
    expect(batch.map(isEventRun)).toEqual([false, true, false])
    expect(appendedEventCount(batch)).toBe(6)
    const expanded = expandEventRuns('s', batch)
    expect(expanded.map((e) => [e.seq, e.time, e.data])).toEqual([
      [0, 0, null],
      [1, 10, { k: 'a', same: true }],
      [2, 10, { k: 'b', same: true }],
      [3, 11, { k: 'c', same: true }],
      [4, 13, { k: 'd', same: true }],
      [5, 5, null],
    ])
    expect(expanded.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
    const plain = [event(0), event(1)]
    expect(expandEventRuns('s', plain)).toBe(plain)
  })

  it('refuses to expand a run its events could not be stored as', () => {
    const bad = { type: 'r', seq: SessionSeq(0), time: 0, run: { dt: [1], data: { k: [1] } } } as StoredEventRun
    expect(() => expandEventRuns('s', [bad])).toThrow(expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' }))
    const noSeq = { type: 'r', seq: -1, time: 0, run: { dt: [], data: {} } } as unknown as StoredEventRun
    expect(() => expandEventRuns('s', [noSeq])).toThrow(expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' }))
  })
})
