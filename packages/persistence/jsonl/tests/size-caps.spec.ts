import { dirname } from 'node:path'
import { SessionId, SessionLogOffset, type SessionSeq, type StoredSessionEvent } from '@dsh/session'
import type { AppendTarget, StoredEventRun } from '@dsh/session-persistence'
import { ELIDED_EVENT_TYPE, EVENT_MAX_BYTES, LINE_MAX_BYTES } from '@dsh/session-persistence/backend'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeEventLines } from '../src/log-format.js'
import { targetOf, tempDir } from './helpers.js'
import { appendLongLineBatch } from './long-lines.js'

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function backend(): JsonlPersistence {
  const made = tempDir('dsh-jsonl-caps-')
  cleanups.push(made.cleanup)
  const p = createJsonlPersistence({ root: made.dir })
  open.push(p)
  return p
}

const T0 = 1_760_000_000_000
const third = Math.floor(EVENT_MAX_BYTES / 3)

/** Frozen flat events of one type, as a Session hands them over: what a zstd log packs into one line. */
function flat(first: number, texts: readonly string[]): StoredSessionEvent[] {
  return texts.map((text, i) =>
    Object.freeze({ type: 'assistant/chunk', seq: (first + i) as SessionSeq, time: T0 + first + i, data: Object.freeze({ delta: text }) }),
  )
}

describe('the event cap on packed lines', () => {
  it('a run of like events that would pack into a line over EVENT_MAX_BYTES is written one line per event, each within the cap', () => {
    const events = flat(0, ['a'.repeat(third), 'b'.repeat(third), 'c'.repeat(third), 'd'])
    const lines = encodeEventLines(events, true).toString('utf8').split('\n').slice(0, -1)
    expect(lines).toHaveLength(4)
    for (const line of lines) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(EVENT_MAX_BYTES)
    // Small like events still pack.
    expect(
      encodeEventLines(flat(0, ['x', 'y', 'z']), true)
        .toString('utf8')
        .split('\n'),
    ).toHaveLength(2)
  })

  it('an appended run (columns) too large for one line is stored one line per event and reads back whole', async () => {
    const p = backend()
    const id = SessionId('run-over-cap')
    const target: AppendTarget = targetOf(id)
    const run: StoredEventRun = {
      type: 'assistant/chunk',
      seq: 0 as SessionSeq,
      time: T0,
      run: { dt: [5, 7], data: { delta: ['a'.repeat(third), 'b'.repeat(third), 'c'.repeat(third)], turn: 1 } },
    }
    await p.append(target, [run])
    const read = (await p.inspect(id)).events
    expect(read.map((e) => [e.seq, e.time, (e.data as { delta: string }).delta.length, (e.data as { turn: number }).turn])).toEqual([
      [0, T0, third, 1],
      [1, T0 + 5, third, 1],
      [2, T0 + 12, third, 1],
    ])
    expect(SessionLogOffset(read.length)).toBe(3)
  })
})

describe('a stored line over LINE_MAX_BYTES', () => {
  it('comes back as an elided event with its size and type, between the events around it, from inspect and from a range read', async () => {
    const p = backend()
    const id = SessionId('long-line')
    await p.append(targetOf(id), flat(0, ['before 0', 'before 1']))
    const file = p.logPath(id)
    await p.close()
    const lineBytes = appendLongLineBatch(file, 2, T0 + 2, LINE_MAX_BYTES + 1024 * 1024, 'assistant/message')
    const reader = createJsonlPersistence({ root: dirname(dirname(file)), readOnly: true })
    open.push(reader)
    const whole = await reader.inspect(id)
    expect(whole.events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'assistant/chunk'],
      [1, 'assistant/chunk'],
      [2, ELIDED_EVENT_TYPE],
    ])
    expect(whole.events[2]).toEqual({
      type: ELIDED_EVENT_TYPE,
      seq: 2,
      time: T0 + 2,
      data: { elided: { bytes: lineBytes - 1, reason: 'line-too-large', type: 'assistant/message' } },
    })
    expect(Object.isFrozen(whole.events[2]!.data)).toBe(true)
    const tail = await reader.inspectRange(id, { limit: 1 })
    expect(tail.events).toEqual([whole.events[2]])
    expect(tail.total).toBe(3)
  })

  it('a batch over the cap whose lines are each within it reads back whole, checked against its trailer', async () => {
    const p = backend()
    const id = SessionId('long-batch')
    await p.append(targetOf(id), flat(0, ['first']))
    const file = p.logPath(id)
    await p.close()
    const texts = [LINE_MAX_BYTES - 1024, 2 * 1024 * 1024, 10]
    expect(appendLongLineBatch(file, 1, T0 + 1, texts)).toBeGreaterThan(LINE_MAX_BYTES)
    const reader = createJsonlPersistence({ root: dirname(dirname(file)), readOnly: true })
    open.push(reader)
    for (const read of [await reader.inspectRange(id, { limit: 3 }), await reader.inspect(id)]) {
      const events = read.events.slice(-3)
      expect(events.map((e) => [e.seq, e.type, (e.data as { text: string }).text.length])).toEqual(
        texts.map((bytes, k) => [1 + k, 'user/message', bytes]),
      )
    }
  })
})
