import { DshError } from '@dsh/context'

export type SubagentErrorCode =
  /** Spawn options do not make a valid v2 descriptor (e.g. a continuable child without a label). */
  | 'SUBAGENT_INVALID_DESCRIPTOR'
  /** A caller-supplied argument (an id, a spawn option) is malformed. */
  | 'SUBAGENT_INVALID_ARGUMENT'
  /** The child would be deeper than the runtime's `maxDepth`. */
  | 'SUBAGENT_DEPTH_EXCEEDED'
  /** `spawn` needs the parent to be live in this process. */
  | 'SUBAGENT_PARENT_NOT_LIVE'
  /** `resume`/`interrupt` target is neither live nor persisted. */
  | 'SUBAGENT_NOT_FOUND'
  /** `resume` caller is not the child's live parent (ARCHITECTURE.md: `UNAUTHORIZED`). */
  | 'SUBAGENT_UNAUTHORIZED'
  /** `resume` target is not a continuable subagent (ARCHITECTURE.md: `NOT_RESUMABLE`). */
  | 'SUBAGENT_NOT_RESUMABLE'
  /** `resume` target is already running a turn. */
  | 'SUBAGENT_BUSY'
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
