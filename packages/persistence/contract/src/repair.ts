import { SessionSeq, type StoredSessionEvent } from '@dsh/session'

/** The `content.code` of a synthetic `tool/result` written by crash repair. */
export const INTERRUPTED_TOOL_CALL_CODE = 'TOOL_INTERRUPTED'

/**
 * The events crash repair appends to a log, so that no turn and no tool call
 * is left dangling:
 *
 * - for every `tool/call` in a turn left open that has no `tool/result` with
 *   its `callId`: a synthetic `tool/result {turn, callId, content: {code:
 *   'TOOL_INTERRUPTED', message}, isError: true}` (the call may or may not have
 *   taken effect; retrying cannot tell, so the message says to check first);
 * - then one `turn/end {reason:'interrupted'}` per open turn.
 *
 * Turns are repaired in the order they started; within a turn, results follow
 * the order of the calls. Backends share this function so that every backend
 * repairs identically; an empty result means the log needs no repair.
 */
export function interruptedTurnEnds(events: readonly StoredSessionEvent[], time: number): StoredSessionEvent[] {
  const open = new Map<number, Map<string, true>>()
  for (const event of events) {
    const data = event.data as { turn?: unknown; callId?: unknown } | null
    const turn = data?.turn
    if (typeof turn !== 'number') continue
    if (event.type === 'turn/start') open.set(turn, new Map())
    else if (event.type === 'turn/end') open.delete(turn)
    else if (typeof data?.callId === 'string') {
      const calls = open.get(turn)
      if (calls === undefined) continue
      if (event.type === 'tool/call') calls.set(data.callId, true)
      else if (event.type === 'tool/result') calls.delete(data.callId)
    }
  }
  let seq = events.length
  const repairs: StoredSessionEvent[] = []
  const push = (type: string, data: StoredSessionEvent['data']): void => {
    repairs.push(Object.freeze({ type, seq: SessionSeq(seq++), time, data: Object.freeze(data) }))
  }
  for (const [turn, calls] of open) {
    for (const callId of calls.keys()) {
      push('tool/result', {
        turn,
        callId,
        content: Object.freeze({
          code: INTERRUPTED_TOOL_CALL_CODE,
          message: 'The process stopped before this tool call finished; its effects are unknown. Check them before calling the tool again.',
        }),
        isError: true,
      })
    }
    push('turn/end', { turn, reason: 'interrupted' })
  }
  return repairs
}

/** The same repair under the name that says what it covers (open turns and their dangling tool calls). */
export const crashRepairEvents = interruptedTurnEnds

/**
 * A crash-repair rule: given a session's whole log as loaded (inherited
 * prefix included) and the time to stamp, the events to append so that
 * nothing the log began is left dangling. Seqs continue after the last
 * event. A rule is pure and idempotent: a log it repaired needs nothing
 * more, and an empty result means nothing to repair.
 */
export type SessionRepairRule = (events: readonly StoredSessionEvent[], time: number) => readonly StoredSessionEvent[]

/**
 * The crash-repair rules a backend applies on `load`: `interruptedTurnEnds`
 * first, then every registered rule in registration order, each seeing the
 * log with the repairs before it appended. Persistence knows no event
 * vocabulary beyond turns and tool calls; a package that writes events
 * which must be closed after a crash (a compaction) registers its rule here,
 * through the `sessionRepairs` service.
 */
export class SessionRepairs {
  readonly #rules: SessionRepairRule[] = []

  /** Adds a rule; the returned function removes it. */
  register(rule: SessionRepairRule): () => void {
    this.#rules.push(rule)
    return () => {
      const at = this.#rules.indexOf(rule)
      if (at >= 0) this.#rules.splice(at, 1)
    }
  }

  /** The events every rule appends to `events`, in order (empty: nothing to repair). */
  eventsFor(events: readonly StoredSessionEvent[], time: number): StoredSessionEvent[] {
    const repairs = interruptedTurnEnds(events, time)
    for (const rule of this.#rules) {
      const log = repairs.length === 0 ? events : [...events, ...repairs]
      repairs.push(...rule(log, time))
    }
    return repairs
  }
}
