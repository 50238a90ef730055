import { DshError, isDshError } from '@dsh/context'

export type SubagentErrorCode =
  /** Spawn options do not make a valid v2 descriptor (e.g. a continuable child without a label). */
  | 'SUBAGENT_INVALID_DESCRIPTOR'
  /** A caller-supplied argument of a control operation (spawn, resume, send, wait, report, interrupt) is malformed. */
  | 'SUBAGENT_INVALID_ARGUMENT'
  /** A runtime or catalog option (`maxDepth`, `coldReadConcurrency`) is out of range; raised at activation. */
  | 'SUBAGENT_INVALID_OPTIONS'
  /** The child would be deeper than the runtime's `maxDepth`. */
  | 'SUBAGENT_DEPTH_EXCEEDED'
  /** `spawn` (and `report`) need the parent to be live in this process. */
  | 'SUBAGENT_PARENT_NOT_LIVE'
  /** The target is neither live nor persisted, or is not a subagent. */
  | 'SUBAGENT_NOT_FOUND'
  /** The caller is not the child's live parent (resume, send) or an ancestor (interrupt, wait, close). */
  | 'SUBAGENT_UNAUTHORIZED'
  /** `resume` target is not a continuable subagent. */
  | 'SUBAGENT_NOT_RESUMABLE'
  /** `resume` target is already running a turn (`send` queues instead). */
  | 'SUBAGENT_BUSY'
  /** The child was closed (`close`): it cannot be resumed, sent input or closed again. */
  | 'SUBAGENT_CLOSED'
  /** `report` from a session that is not a subagent (it has no parent to report to). */
  | 'SUBAGENT_NOT_A_SUBAGENT'
  /** A one-shot child's final message is not JSON matching its `outputSchema` (carried in the result, not thrown). */
  | 'SUBAGENT_INVALID_OUTPUT'
  /** `resume` of a cold child without a `sessionPersistence` service to load it from. */
  | 'SUBAGENT_PERSISTENCE_UNAVAILABLE'
  /** Listing or running needs `sessionProjections` (and the `subagent` unit registered in it). */
  | 'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE'
  /** Listing or running needs the `sessions` store. */
  | 'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE'
  /** Listing needs the `sessionQuery` corpus. */
  | 'SUBAGENT_CONTROL_QUERY_UNAVAILABLE'
  /** Spawn, resume or send on the runtime of a read-only host (it lists, and starts no run). */
  | 'SUBAGENT_READ_ONLY'
  /** A spawn asks for a budget but the runtime does not see its children's events (no `on` in its service source). */
  | 'SUBAGENT_BUDGET_UNENFORCEABLE'
  /** A spawn under a budget with nothing left of some kind (tokens, cost, turns or wall time). */
  | 'SUBAGENT_BUDGET_EXHAUSTED'
  /** A spawn with a cost budget (its own or an ancestor's) whose model the price table does not price, or without a price table: cost fails closed. */
  | 'SUBAGENT_BUDGET_UNPRICED'
  /**
   * In a result: the run ended `budget` (a budget of the child or of an
   * ancestor it shares was used up). Thrown by `resume` and `send` when the
   * child's next run could not start under it, before anything is written.
   */
  | 'SUBAGENT_BUDGET_EXCEEDED'
  /** The runtime was disposed. */
  | 'SUBAGENT_DISPOSED'
  | 'CANCELLED'

export class SubagentError extends DshError<SubagentErrorCode> {}

export function cancelled(): SubagentError {
  return new SubagentError('CANCELLED', 'The subagent operation was cancelled by its caller (AbortSignal aborted).')
}

export function busy(childId: string): SubagentError {
  return new SubagentError(
    'SUBAGENT_BUSY',
    `Subagent '${childId}' is running a turn; wait for it (or interrupt it), or send it a message to queue.`,
  )
}

export function closed(childId: string): SubagentError {
  return new SubagentError('SUBAGENT_CLOSED', `Subagent '${childId}' has been closed and cannot run again; start a new subagent instead.`)
}

export function notResumable(childId: string): SubagentError {
  return new SubagentError(
    'SUBAGENT_NOT_RESUMABLE',
    `Subagent '${childId}' is not continuable (it is one-shot, or its own descriptor is missing or invalid); spawn a new child instead.`,
  )
}

export function notFound(childId: string): SubagentError {
  return new SubagentError('SUBAGENT_NOT_FOUND', `There is no subagent '${childId}' (list your subagents with list_agents).`)
}

/** A person-readable failure for `subagent/end`: `<CODE>: <message>`. */
export function describeError(error: unknown): string {
  if (isDshError(error)) return `${error.code}: ${error.message}`
  return error instanceof Error ? error.message : String(error)
}
