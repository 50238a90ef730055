import { DshError } from '@dsh/context'

/**
 * Failures of opening the backend. Queries fail with the contract's
 * `SessionQueryError` (`SESSION_QUERY_*`, `CANCELLED`) instead.
 */
export type PostgresSessionQueryErrorCode =
  /** No pool given, or a bad option value. */
  'POSTGRES_QUERY_INVALID_OPTIONS'

export class PostgresSessionQueryError extends DshError<PostgresSessionQueryErrorCode> {}
