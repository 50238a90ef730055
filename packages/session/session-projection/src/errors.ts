import { DshError } from '@dsh/context'

export type SessionProjectionErrorCode =
  | 'SESSION_PROJECTION_VERSION_CONFLICT'
  | 'SESSION_PROJECTION_UNKNOWN_KEY'
  | 'SESSION_PROJECTION_INVALID_UNIT'
  | 'SESSION_PROJECTION_INVALID_CHECKPOINT'

export class SessionProjectionError extends DshError<SessionProjectionErrorCode> {}
