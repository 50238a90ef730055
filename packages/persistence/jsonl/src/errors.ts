import { DshError } from '@dsh/context'
import { persistenceError } from '@dsh/session-persistence/backend'

/**
 * Failures of opening a root, before any session is touched. Operations on
 * sessions fail with the contract's `SessionPersistenceError` instead, so
 * callers handle every backend the same way.
 */
export type JsonlPersistenceErrorCode =
  /** The root was written with the other encoding (`zstd` vs `none`); one root holds one encoding. */
  | 'JSONL_PERSISTENCE_ENCODING_MISMATCH'
  /** The root's marker file is unreadable, or names another format or version than the one this package reads. */
  | 'JSONL_PERSISTENCE_UNSUPPORTED_ROOT'
  /** A read-only open of a directory that is not a dsh root (no marker file): nothing was created. */
  | 'JSONL_PERSISTENCE_NOT_A_ROOT'
  /** The options are invalid (relative root, unknown compression, bad level). */
  | 'JSONL_PERSISTENCE_INVALID_OPTIONS'

export class JsonlPersistenceError extends DshError<JsonlPersistenceErrorCode> {}

export function notFound(id: string): Error {
  return persistenceError('SESSION_PERSISTENCE_NOT_FOUND', `Session ${labelOf(id)} is not persisted here.`, { details: { id } })
}

/** Any operation on a backend after `close()`. */
export function closedError(root: string): Error {
  return persistenceError('SESSION_PERSISTENCE_CLOSED', `This persistence backend (${root}) has been closed; create a new one.`)
}

export function ioError(what: string, cause: unknown): Error {
  return persistenceError('SESSION_PERSISTENCE_IO', `Could not ${what}: ${(cause as Error)?.message ?? String(cause)}.`, { cause })
}

/**
 * `error` as `SESSION_PERSISTENCE_IO` when it is a system call's failure (an
 * errno: it stays in `cause`); any other error (already typed) unchanged.
 */
export function systemToIo(what: string, error: unknown): Error {
  return isSystemError(error) ? ioError(what, error) : (error as Error)
}

function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).syscall === 'string'
}

/**
 * `SESSION_PERSISTENCE_CORRUPT` for an entry inside a session directory that
 * is not what this backend writes there (a symbolic link, a directory where
 * a file belongs): it is refused, never followed out of the root.
 */
export function entryRefused(path: string, what: string, cause?: unknown): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CORRUPT',
    `${path} should be ${what} but is not (a symbolic link, or another kind of file); symbolic links are never followed out of the root. Remove or restore that entry, or delete the session explicitly.`,
    { details: { path }, ...(cause === undefined ? {} : { cause }) },
  )
}

/** The longest label {@link labelOf} gives, in UTF-16 code units. */
const LABEL_MAX = 80

/**
 * A short, printable form of an id for messages: the id as a JSON string, at
 * most 80 code units. A longer one keeps whole escapes and whole characters
 * of the id and ends in `…"`, so a cut never leaves half an escape (`\u00`)
 * or half a surrogate pair; the work is bounded by the label, not the id.
 */
export function labelOf(id: string): string {
  if (id.length <= LABEL_MAX) {
    const text = JSON.stringify(id)
    if (text.length <= LABEL_MAX) return text
  }
  let kept = '"'
  for (const ch of id) {
    const escaped = JSON.stringify(ch).slice(1, -1)
    if (kept.length + escaped.length > LABEL_MAX - 2) break
    kept += escaped
  }
  return `${kept}…"`
}
