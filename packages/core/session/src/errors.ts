import { DshError } from '@dsh/context'

export type SessionErrorCode =
  | 'SESSION_INVALID_ID'
  | 'SESSION_INVALID_SEQ'
  | 'SESSION_INVALID_OFFSET'
  | 'SESSION_INVALID_HEADER'
  | 'SESSION_INVALID_EVENT'
  /** An event whose encoded line is over `EVENT_MAX_BYTES`: nothing was appended. */
  | 'SESSION_EVENT_TOO_LARGE'
  | 'SESSION_INVALID_SEED'
  | 'SESSION_REENTRANT_APPEND'
  | 'SESSION_FORK_OPEN_TURN'
  | 'SESSION_FORK_OUT_OF_RANGE'
  | 'SESSION_ALREADY_EXISTS'
  | 'SESSION_NOT_FOUND'
  | 'SESSION_DISPOSED'
  | 'SESSION_FLUSH_FAILED'

export class SessionError extends DshError<SessionErrorCode> {}
