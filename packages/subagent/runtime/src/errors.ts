import { DshError } from '@dsh/context'

export type SubagentErrorCode =
  /** Spawn options do not make a valid v2 descriptor (e.g. a continuable child without a label). */
  | 'SUBAGENT_INVALID_DESCRIPTOR'
  /** A caller-supplied argument (an id, a spawn option) is malformed. */
  | 'SUBAGENT_INVALID_ARGUMENT'
  /** The child would be deeper than the runtime's `maxDepth`. */
  | 'SUBAGENT_DEPTH_EXCEEDED'
  /** `spawn` (and `report`) need the parent to be live in this process. */
  | 'SUBAGENT_PARENT_NOT_LIVE'
  /** The target is neither live nor persisted, or is not a subagent. */
  | 'SUBAGENT_NOT_FOUND'
  /** The caller is not the child's live parent (resume, send) or an ancestor (interrupt, wait, close) (ARCHITECTURE.md: `UNAUTHORIZED`). */
  | 'SUBAGENT_UNAUTHORIZED'
  /** `resume` target is not a continuable subagent (ARCHITECTURE.md: `NOT_RESUMABLE`). */
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
  /** The query corpus failed to enumerate; the whole listing fails (per-child isolation covers only cold reads). */
  | 'SUBAGENT_CONTROL_ENUMERATION_FAILED'
  /** The runtime was disposed. */
  | 'SUBAGENT_DISPOSED'
  | 'CANCELLED'

export class SubagentError extends DshError<SubagentErrorCode> {}

export function cancelled(): SubagentError {
  return new SubagentError('CANCELLED', 'The subagent operation was cancelled by its caller (AbortSignal aborted).')
}
