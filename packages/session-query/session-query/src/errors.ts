import { DshError } from '@dsh/context'

export type SessionQueryErrorCode =
  | 'SESSION_QUERY_NOT_FOUND'
  | 'SESSION_QUERY_CORRUPT_SESSION'
  | 'SESSION_QUERY_PERSISTENCE_FAILED'
  | 'SESSION_QUERY_INVALID_FILTER'
  | 'SESSION_QUERY_INVALID_CURSOR'
  | 'SESSION_QUERY_STALE_CURSOR'
  | 'CANCELLED'

export class SessionQueryError extends DshError<SessionQueryErrorCode> {}
