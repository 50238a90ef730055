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
  // Every start in log order with whether an end closed it. `newest` holds the
  // indexes of the starts and `byId` those of each id's starts, oldest first;
  // a closed start is dropped when it comes to the top, so each start is
  // pushed and popped at most once per stack and the rule is one pass.
  const starts: (string | null)[] = []
  const closed: boolean[] = []
  const newest: number[] = []
  const byId = new Map<string, number[]>()
  const newestOpen = (stack: number[] | undefined): number | undefined => {
    while (stack !== undefined && stack.length > 0) {
      const at = stack.pop() as number
      if (!closed[at]) return at
    }
    return undefined
  }
  for (const event of events) {
    if (event.type !== 'compaction/start' && event.type !== 'compaction/end') continue
    const id = (event.data as { compactionId?: unknown } | null)?.compactionId
    const key = typeof id === 'string' ? id : null
    if (event.type === 'compaction/start') {
      const at = starts.length
      starts.push(key)
      closed.push(false)
      newest.push(at)
      if (key !== null) {
        const own = byId.get(key)
        if (own === undefined) byId.set(key, [at])
        else own.push(at)
      }
    } else {
      const at = newestOpen(key === null ? newest : byId.get(key))
      if (at !== undefined) closed[at] = true
    }
  }
  const open = starts.filter((_, at) => !closed[at])
  return open.map((id, i) => {
    const data: Record<string, JsonValue> =
      id === null ? { error: INTERRUPTED_COMPACTION_ERROR } : { compactionId: id, error: INTERRUPTED_COMPACTION_ERROR }
    return Object.freeze({ type: 'compaction/end', seq: SessionSeq(events.length + i), time, data: Object.freeze(data) })
  })
}
