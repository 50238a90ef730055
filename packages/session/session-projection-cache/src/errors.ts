import { DshError } from '@dsh/context'

export type SessionProjectionCacheErrorCode =
  | 'SESSION_PROJECTION_CACHE_POISONED'
  | 'SESSION_PROJECTION_CACHE_UNAVAILABLE'

export class SessionProjectionCacheError extends DshError<SessionProjectionCacheErrorCode> {}
