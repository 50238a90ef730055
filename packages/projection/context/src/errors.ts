import { DshError } from '@dsh/context'

export type SessionContextErrorCode =
  /** `contextOf` was given something that is neither a session, a session reference nor a session id. */
  | 'SESSION_CONTEXT_INVALID_TARGET'
  /** A cold session's context was asked for, but no `sessionPersistence` service is available to read it. */
  | 'SESSION_CONTEXT_NO_PERSISTENCE'

export class SessionContextError extends DshError<SessionContextErrorCode> {}
