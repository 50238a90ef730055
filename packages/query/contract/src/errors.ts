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
  /**
   * The index cannot answer this request now and nothing else can (index
   * backends): it is missing, damaged, locked, unreadable, or too far behind
   * the logs, and a read never builds or repairs it. A writer or a reindex
   * brings it back; retry then.
   */
  | 'SESSION_QUERY_INDEX_UNAVAILABLE'
  /**
   * A request-serving statement exceeded its budget (time, or rows stepped)
   * and was stopped; narrow the request (fewer or rarer words) or retry.
   */
  | 'SESSION_QUERY_BUDGET_EXCEEDED'
  /** The query backend was closed. */
  | 'SESSION_QUERY_CLOSED'
  | 'CANCELLED'

export class SessionQueryError extends DshError<SessionQueryErrorCode> {}
