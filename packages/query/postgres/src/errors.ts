import { DshError } from '@dsh/context'

/**
 * Failures of opening the backend, and `catchUp` of a read-only one. Queries fail with the contract's
 * `SessionQueryError` (`SESSION_QUERY_*`, `CANCELLED`) instead.
 */
export type PostgresSessionQueryErrorCode =
  /** No pool given, or a bad option value. */
  | 'POSTGRES_QUERY_INVALID_OPTIONS'
  /** `catchUp` of a backend opened read-only (it never writes the search index). */
  | 'POSTGRES_QUERY_READ_ONLY'

export class PostgresSessionQueryError extends DshError<PostgresSessionQueryErrorCode> {}
