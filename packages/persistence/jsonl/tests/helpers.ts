import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import type { AppendTarget } from '@dsh/session-persistence'
import { type HeaderFields, headerOf } from '@dsh/test-kit'

export { headerOf, tempDir } from '@dsh/test-kit'

export function targetOf(id: string, inheritedEventCount = 0, extra: HeaderFields = {}): AppendTarget {
  return { header: headerOf(id, extra), inheritedEventCount: inheritedEventCount as AppendTarget['inheritedEventCount'] }
}

/**
 * `count` events from `first`: a turn of chunks with a user message, a tool
 * call and a closing turn/end — deep-frozen, as a `Session` hands them over
 * (so a version 4 zstd log packs their runs of chunks; see `encodeEventLines`).
 */
export function eventsFrom(first: number, count: number, turn = 1): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) => {
    const seq = first + i
    const data =
      i % 5 === 0
        ? { text: `message ${seq} — ünïcödé ✓ 🙂` }
        : i % 5 === 1
          ? { turn, callId: `c${seq}`, name: 'read', arguments: { path: `/tmp/${seq}`, deep: [1, { x: null }] } }
          : { turn, index: seq, delta: `token-${seq} ` }
    const type = i % 5 === 0 ? 'user/message' : i % 5 === 1 ? 'tool/call' : 'assistant/chunk'
    return deepFreeze({ type, seq: seq as SessionSeq, time: 1_700_000_000_000 + seq, data })
  })
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
    Object.freeze(value)
  }
  return value
}

export function event(seq: number, type: string, data: StoredSessionEvent['data']): StoredSessionEvent {
  return { type, seq: seq as SessionSeq, time: 1_700_000_000_000 + seq, data }
}
