import type { Session } from '@dsh/session'
import type { PreviousResponse } from '@dsh/session-context'

/** The wire protocol `step/start` names for a Responses step (`api`). */
export const RESPONSES_API = 'responses'

/** Who a request goes to: a chain continues only on the same provider and model. */
export interface ChainTarget {
  readonly provider: string
  readonly model: string
}

/**
 * The response a Responses request continues (`previous_response_id`), read
 * from the session's own log: the newest `step/end`, when it carries a
 * `responseId` and ended `stop`, `tool-calls` or `max-tokens`, and its
 * `step/start` names the Responses API, the same provider and the same
 * model. Anything else starts a new chain (undefined):
 * - a step on another provider or model (a resume with `--model` or
 *   another base URL), or on Chat Completions;
 * - a step that failed or was aborted (its response may be incomplete);
 * - a fork: only the session's own events are read, never the prefix it
 *   inherited (its parent's responses are the parent's chain);
 * - a compaction after the step: the compacted context does not continue
 *   the response, so the renderer sends the whole input without it.
 *
 * Walks back from the end of the log: it costs the events since the newest
 * step.
 */
export function previousResponseOf(session: Session, target: ChainTarget): PreviousResponse | undefined {
  // Positions, not `session.events`: that snapshot copies the whole log after every append.
  const floor = session.inheritedEventCount
  let end: { seq: number; responseId: string } | undefined
  for (let i = session.seq - 1; i >= floor; i--) {
    const event = session.eventAt(i)
    if (event === undefined) return undefined
    if (end === undefined) {
      if (event.type !== 'step/end') continue
      const data = event.data as { responseId?: unknown; finish?: unknown }
      if (typeof data.responseId !== 'string' || data.responseId.length === 0) return undefined
      if (data.finish !== 'stop' && data.finish !== 'tool-calls' && data.finish !== 'max-tokens') return undefined
      end = { seq: event.seq, responseId: data.responseId }
      continue
    }
    if (event.type === 'step/end') return undefined
    if (event.type !== 'step/start') continue
    const data = event.data as { api?: unknown; provider?: unknown; model?: unknown }
    if (data.api !== RESPONSES_API || data.provider !== target.provider || data.model !== target.model) return undefined
    return { id: end.responseId, throughSeq: end.seq }
  }
  return undefined
}
