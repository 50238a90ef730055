import type { Session, StoredSessionEvent } from '@dsh/session'
import {
  SUBAGENT_END_EVENT,
  SUBAGENT_NOTICE_EVENT,
  SUBAGENT_QUEUED_EVENT,
  SUBAGENT_START_EVENT,
  type SubagentEndData,
  type SubagentEndReason,
  type SubagentNotice,
} from './lifecycle.js'
import type { WaitEntry } from './runtime-types.js'

/**
 * Reads of a child's own log that the runtime's control decisions rest on.
 * Each looks at lifecycle events only (the runtime writes them; no driver
 * does) and never at the descriptor, which only the projection units read.
 */

/** Input queued for a child: the seq of its `subagent/queued` event and its text. */
export interface QueuedInput {
  readonly seq: number
  readonly text: string
}

/** True when the own suffix holds the final `subagent/end {reason:'closed'}`. */
export function isClosed(events: readonly StoredSessionEvent[], cut: number): boolean {
  for (let i = events.length - 1; i >= cut; i--) {
    const event = events[i]!
    if (event.type === SUBAGENT_END_EVENT && (event.data as { reason?: unknown } | null)?.reason === 'closed') return true
  }
  return false
}

/** Own `subagent/queued` inputs that no `subagent/start` has delivered yet, in order. */
export function pendingQueued(events: readonly StoredSessionEvent[], cut: number): QueuedInput[] {
  const delivered = new Set<number>()
  const queued: QueuedInput[] = []
  for (let i = cut; i < events.length; i++) {
    const event = events[i]!
    const data = event.data as { queued?: unknown; text?: unknown } | null
    if (event.type === SUBAGENT_START_EVENT && typeof data?.queued === 'number') delivered.add(data.queued)
    else if (event.type === SUBAGENT_QUEUED_EVENT && typeof data?.text === 'string') queued.push({ seq: event.seq, text: data.text })
  }
  return queued.filter((input) => !delivered.has(input.seq))
}

/** The notices appended to `session`'s own log since its last `turn/start`. */
export function noticesSinceLastTurn(session: Session): SubagentNotice[] {
  const notices: SubagentNotice[] = []
  for (let seq = session.seq - 1; seq >= session.inheritedEventCount; seq--) {
    const event = session.eventAt(seq)!
    if (event.type === 'turn/start') break
    if (event.type === SUBAGENT_NOTICE_EVENT) notices.push(event.data as SubagentNotice)
  }
  return notices.reverse()
}

/**
 * How far into its log the child's latest run (after its last
 * `subagent/start`) had read when it made its last model call: notices logged
 * before the returned seq were in that call's request. A driver builds each
 * request after the events of the step before it (`turn/start` for the first,
 * the previous step's `tool/result`s after that) and logs `step/start` as it
 * sends it, so the boundary is the last of those events before the last
 * `step/start`. -1 when the run made no model call (e.g. a scripted run, which
 * reads its notices only as it starts).
 */
export function lastRequestBoundary(session: Session): number {
  let step = -1
  for (let seq = session.seq - 1; seq >= session.inheritedEventCount; seq--) {
    const type = session.eventAt(seq)!.type
    if (type === SUBAGENT_START_EVENT) return -1
    if (type === 'step/start' && step < 0) step = seq
    else if (step >= 0 && (type === 'tool/result' || type === 'turn/start')) return seq
  }
  return -1
}

/** A settled child's last run as its log records it (a crash-repaired run reports its `turn/end`). */
export function lastSettlement(id: string, events: readonly StoredSessionEvent[], cut: number): WaitEntry {
  let text: string | undefined
  let turnReason: string | undefined
  for (let i = events.length - 1; i >= cut; i--) {
    const event = events[i]!
    const data = event.data as Record<string, unknown> | null
    if (event.type === SUBAGENT_END_EVENT) {
      if (data?.reason === 'closed') return { id, state: 'closed' }
      const end = data as unknown as SubagentEndData
      return {
        id,
        state: 'settled',
        reason: end.reason,
        ...(end.text === undefined ? {} : { text: end.text }),
        ...(end.error === undefined ? {} : { error: end.error }),
        ...(end.output === undefined ? {} : { output: end.output }),
        ...(end.exceeded === undefined ? {} : { exceeded: end.exceeded }),
      }
    }
    if (event.type === 'turn/end' && turnReason === undefined) turnReason = String(data?.reason)
    if (event.type === 'assistant/message' && text === undefined && turnReason !== undefined) text = String(data?.text)
    if (event.type === SUBAGENT_START_EVENT && turnReason !== undefined) break
  }
  return {
    id,
    state: 'settled',
    ...(turnReason === undefined ? {} : { reason: turnReason as SubagentEndReason }),
    ...(text === undefined ? {} : { text }),
  }
}

/** The latest cut of `session` that is not inside an open turn (a parent mid-turn forks before that turn). */
export function latestClosedCut(session: Session): number {
  let cut: number = session.seq
  for (let open = session.openTurnBefore(cut); open !== undefined; open = session.openTurnBefore(cut)) {
    let start = cut - 1
    while (start > 0) {
      const event = session.eventAt(start)
      if (event?.type === 'turn/start' && (event.data as { turn?: unknown }).turn === open) break
      start--
    }
    cut = Math.max(0, start)
  }
  return cut
}
