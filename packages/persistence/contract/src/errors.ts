import { DshError } from '@dsh/context'

export type SessionPersistenceErrorCode =
  /** The batch does not continue the stored log (wrong first seq, gap, other lifecycle). */
  | 'SESSION_PERSISTENCE_CONFLICT'
  /** A committed part of a log cannot be read back as written. */
  | 'SESSION_PERSISTENCE_CORRUPT'
  /** Another writer (usually another process) holds the session. */
  | 'SESSION_PERSISTENCE_LOCKED'
  | 'SESSION_PERSISTENCE_NOT_FOUND'
  | 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION'
  | 'SESSION_PERSISTENCE_INVALID_ID'
  /** A first append whose header would not read back (`parseSessionHeader`): nothing is stored. */
  | 'SESSION_PERSISTENCE_INVALID_HEADER'
  /** An event that cannot be stored losslessly (bad type, seq, time or data). */
  | 'SESSION_PERSISTENCE_INVALID_EVENT'
  /** An event whose encoded line is over `EVENT_MAX_BYTES` (`@dsh/protocol/limits`): the batch is refused whole. */
  | 'SESSION_PERSISTENCE_EVENT_TOO_LARGE'
  | 'SESSION_PERSISTENCE_IO'
  /** The backend's server cannot be reached now (connection refused or lost, shutting down); retrying once it is back succeeds. */
  | 'SESSION_PERSISTENCE_UNAVAILABLE'
  | 'SESSION_PERSISTENCE_CLOSED'
  /** A write (append, load's repair, delete) on a backend opened read-only. */
  | 'SESSION_PERSISTENCE_READ_ONLY'
  /** `delete` of a session that forks still reference (materialize the dependants first). */
  | 'SESSION_PERSISTENCE_REFERENCED'
  /** A ranged read's `from`, `to` or `limit` that is not a non-negative integer. */
  | 'SESSION_PERSISTENCE_INVALID_RANGE'
  /** A coordinator or wrapper option out of range. */
  | 'SESSION_PERSISTENCE_INVALID_OPTION'
  /** `putAttachment` bytes over the backend's attachment cap (default 20 MiB): nothing is stored. */
  | 'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE'
  /** `readAttachment` of a digest the session neither stored nor inherits from its fork source. */
  | 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND'
  /** Attachment input that cannot be stored or looked up: bytes that are not a Uint8Array, a media type that is not type/subtype, a malformed digest. */
  | 'SESSION_PERSISTENCE_INVALID_ATTACHMENT'
  /** An attachment helper given a backend without `putAttachment`/`readAttachment`. */
  | 'SESSION_PERSISTENCE_ATTACHMENTS_UNSUPPORTED'
  | 'CANCELLED'

export class SessionPersistenceError extends DshError<SessionPersistenceErrorCode> {}

/** A contract error (`SESSION_PERSISTENCE_*` / `CANCELLED`) with an optional cause and details: what every backend throws. */
export function persistenceError(
  code: SessionPersistenceErrorCode,
  message: string,
  options?: { cause?: unknown; details?: Record<string, unknown> },
): SessionPersistenceError {
  return new SessionPersistenceError(code, message, options)
}

/** The `CANCELLED` error every persistence read rejects with after its signal aborted. */
export function persistenceCancelled(): SessionPersistenceError {
  return new SessionPersistenceError('CANCELLED', 'The persistence operation was cancelled by its caller (AbortSignal aborted).')
}
