import { DshError } from '@dsh/context'

export type SessionPersistenceErrorCode =
  | 'SESSION_PERSISTENCE_CONFLICT'
  | 'SESSION_PERSISTENCE_CORRUPT'
  | 'SESSION_PERSISTENCE_LOCKED'
  | 'SESSION_PERSISTENCE_NOT_FOUND'
  | 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION'
  | 'SESSION_PERSISTENCE_INVALID_ID'
  | 'SESSION_PERSISTENCE_IO'
  | 'SESSION_PERSISTENCE_CLOSED'
  | 'CANCELLED'

export class SessionPersistenceError extends DshError<SessionPersistenceErrorCode> {}
