import { SessionId, SessionLogOffset, type SessionSeq, type StoredSessionEvent } from '@dsh/session'
import type { AppendTarget, StoredEventRun } from '@dsh/session-persistence'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeEventLines } from '../src/log-format.js'
import { targetOf, tempDir } from './helpers.js'

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
