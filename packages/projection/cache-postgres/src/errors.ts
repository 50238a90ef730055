import { DshError } from '@dsh/context'

/**
 * Configuration failures of the PostgreSQL checkpoint cache. Reads and writes
 * never throw these: like the SQLite cache, a lookup throws only
 * `SESSION_PROJECTION_CACHE_POISONED` (every consumer treats it as a miss) and
 * writes fail softly.
 */
export type PostgresProjectionCacheErrorCode =
  /** No pool, no projection registry, a bad throttle, or a mirrorSessions that is not a positive integer. */
  'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS'

export class PostgresProjectionCacheError extends DshError<PostgresProjectionCacheErrorCode> {}
