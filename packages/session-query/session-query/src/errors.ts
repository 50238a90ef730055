import { DshError } from '@dsh/context'

export type SessionQueryErrorCode =
  | 'SESSION_QUERY_NOT_FOUND'
  | 'SESSION_QUERY_CORRUPT_SESSION'
  | 'SESSION_QUERY_PERSISTENCE_FAILED'
  | 'SESSION_QUERY_INVALID_FILTER'
  | 'SESSION_QUERY_INVALID_CURSOR'
  /** A search cursor issued before the index changed (index backends). */
  | 'SESSION_QUERY_STALE_CURSOR'
  /** The index database failed in a way a rebuild could not cure (index backends). */
  | 'SESSION_QUERY_INDEX_FAILED'
  /** The query backend was closed. */
  | 'SESSION_QUERY_CLOSED'
  | 'CANCELLED'

export class SessionQueryError extends DshError<SessionQueryErrorCode> {}
