import { DshError } from '@dsh/context'

export type SessionProjectionErrorCode =
  /** A key is already registered with another `stateVersion`. */
  | 'SESSION_PROJECTION_VERSION_CONFLICT'
  /** A snapshot, fold or checkpoint asked for a key no unit is registered under. */
  | 'SESSION_PROJECTION_UNKNOWN_KEY'
  /** `register` got something that is not a unit (missing function, bad key or version). */
  | 'SESSION_PROJECTION_INVALID_UNIT'
  /** A checkpoint row is poisoned: malformed, or its state fails the unit's schema. */
  | 'SESSION_PROJECTION_INVALID_CHECKPOINT'
  /** `fold` got events whose seq is not their position, or a cut past the end. */
  | 'SESSION_PROJECTION_INVALID_FOLD_INPUT'

export class SessionProjectionError extends DshError<SessionProjectionErrorCode> {}
