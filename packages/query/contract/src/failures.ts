import { isDshError, raceAbort, throwIfAborted } from '@dsh/context'
import { SessionQueryError, type SessionQueryErrorCode } from './errors.js'

/**
 * A `SessionQueryError` raised by a backend (closed, budget exceeded, index
 * failed, ...): the same class the main entry exports, so an application's
 * `instanceof SessionQueryError` holds for every backend's errors.
 */
export function queryError(
  code: SessionQueryErrorCode,
  message: string,
  options?: { readonly cause?: unknown; readonly details?: Record<string, unknown> },
): SessionQueryError {
  return new SessionQueryError(code, message, options)
}

/** The `CANCELLED` error every query read rejects with once its signal aborted. */
export function cancelled(): SessionQueryError {
  return new SessionQueryError('CANCELLED', 'The query was cancelled by its caller (AbortSignal aborted).')
}

/** Throws `CANCELLED` when `signal` is aborted. */
export function checkAborted(signal: AbortSignal | undefined): void {
  throwIfAborted(signal, cancelled)
}

/**
 * Awaits `promise` for a caller holding `signal`: rejects with `CANCELLED` as
 * soon as the signal aborts, and also when the promise settles after the
 * abort, so a read that lands late never resolves successfully.
 */
export function guarded<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  return raceAbort(promise, signal, cancelled)
}

export function invalidFilter(why: string, details?: Record<string, unknown>): SessionQueryError {
  return new SessionQueryError(
    'SESSION_QUERY_INVALID_FILTER',
    `Invalid query request: ${why}.`,
    details === undefined ? undefined : { details },
  )
}

export function invalidCursor(why: string): SessionQueryError {
  return new SessionQueryError(
    'SESSION_QUERY_INVALID_CURSOR',
    `Invalid cursor: ${why}. Pass a cursor exactly as a previous page of the same request returned it, or omit it to start from the first page.`,
  )
}

export function notFound(id: string): SessionQueryError {
  return new SessionQueryError('SESSION_QUERY_NOT_FOUND', `Session '${id}' is neither live in this process nor persisted.`, {
    details: { id },
  })
}

/**
 * Translates a failure of a persistence read into the query vocabulary:
 * not found, a corrupt log (that id only), cancellation, or a persistence
 * failure carrying the original error as its cause.
 */
export function fromPersistenceError(error: unknown, id: string | undefined, signal: AbortSignal | undefined): SessionQueryError {
  if (error instanceof SessionQueryError) return error
  if (signal?.aborted || isDshError(error, 'CANCELLED')) return cancelled()
  if (id !== undefined && isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND', 'SESSION_PERSISTENCE_INVALID_ID')) return notFound(id)
  if (id !== undefined && isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')) {
    return new SessionQueryError(
      'SESSION_QUERY_CORRUPT_SESSION',
      `The persisted log of session '${id}' is corrupt and cannot be read: ${describe(error)}`,
      { cause: error, details: { id } },
    )
  }
  const what = id === undefined ? 'listing persisted sessions' : `reading session '${id}'`
  return new SessionQueryError('SESSION_QUERY_PERSISTENCE_FAILED', `Persistence failed while ${what}: ${describe(error)}`, {
    cause: error,
    ...(id === undefined ? {} : { details: { id } }),
  })
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
