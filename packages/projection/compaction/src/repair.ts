import { type JsonValue, SessionSeq, type StoredSessionEvent } from '@dsh/session'

/** The `error` of the `compaction/end` crash repair writes. */
export const INTERRUPTED_COMPACTION_ERROR = 'interrupted'

/**
 * The crash-repair rule of compaction: every `compaction/start` without its
 * `compaction/end` gets `compaction/end {compactionId, error: 'interrupted'}`,
 * in start order. An end names its compaction by `compactionId`; one
 * without an id closes the newest open compaction. The context unit applies
 * a summary only at an end without `error`, so a repaired log shows the
 * context as it was before the compaction began.
 */
export function interruptedCompactionEnds(events: readonly StoredSessionEvent[], time: number): StoredSessionEvent[] {
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
  return open.map((id, i) => {
    const data: Record<string, JsonValue> =
      id === null ? { error: INTERRUPTED_COMPACTION_ERROR } : { compactionId: id, error: INTERRUPTED_COMPACTION_ERROR }
    return Object.freeze({ type: 'compaction/end', seq: SessionSeq(events.length + i), time, data: Object.freeze(data) })
  })
}
