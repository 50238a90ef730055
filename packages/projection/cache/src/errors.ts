import { DshError } from '@dsh/context'

export type SessionProjectionCacheErrorCode =
  /** A cached row could not be turned back into a view (bad JSON, or state the unit's schema rejects). Treat as a miss. */
  | 'SESSION_PROJECTION_CACHE_POISONED'
  /** The database could not be opened, written or rebuilt, or the cache is closed (`details.state`: `CacheFileState`); reported through the logger, never thrown at readers. */
  | 'SESSION_PROJECTION_CACHE_UNAVAILABLE'
  /** The cache or its plugin was configured wrongly (no path, bad throttle). */
  | 'SESSION_PROJECTION_CACHE_INVALID_OPTIONS'

export class SessionProjectionCacheError extends DshError<SessionProjectionCacheErrorCode> {}
