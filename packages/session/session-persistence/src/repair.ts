import { SessionSeq, type StoredSessionEvent } from '@dsh/session'

/**
 * The events crash repair appends to a log: one `turn/end {reason:'interrupted'}`
 * per turn left open, in the order the turns started. Backends share it so
 * that every backend repairs identically; an empty result means the log needs
 * no repair.
 */
export function interruptedTurnEnds(events: readonly StoredSessionEvent[], time: number): StoredSessionEvent[] {
  const open = new Set<number>()
  for (const event of events) {
    const turn = (event.data as { turn?: unknown } | null)?.turn
    if (typeof turn !== 'number') continue
    if (event.type === 'turn/start') open.add(turn)
    else if (event.type === 'turn/end') open.delete(turn)
  }
  let seq = events.length
  return [...open].map((turn) =>
    Object.freeze({
      type: 'turn/end',
      seq: SessionSeq(seq++),
      time,
      data: Object.freeze({ turn, reason: 'interrupted' }),
    }),
  )
}
