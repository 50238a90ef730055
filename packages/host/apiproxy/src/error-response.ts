import { isDshError } from '@dsh/context'
import { ApiError } from './errors.js'
import type { ErrorBody } from './schemas.js'

// Service codes the API passes through unchanged, with the status they mean
// on the wire. Codes not listed fall back to their suffix (below).
const SERVICE_STATUS: Readonly<Record<string, number>> = {
  SESSION_QUERY_NOT_FOUND: 404,
  SESSION_QUERY_INVALID_FILTER: 400,
  SESSION_QUERY_INVALID_CURSOR: 400,
  SESSION_QUERY_STALE_CURSOR: 409,
  SESSION_QUERY_CORRUPT_SESSION: 422,
  SESSION_QUERY_PERSISTENCE_FAILED: 503,
  SESSION_INVALID_ID: 400,
  CONTEXT_SERVICE_UNAVAILABLE: 503,
  // The caller went away; nobody reads this status, but logs should not call it a server fault.
  CANCELLED: 499,
}

const SUFFIX_STATUS: ReadonlyArray<readonly [RegExp, number]> = [
  [/_NOT_FOUND$/, 404],
  [/_INVALID(_[A-Z]+)*$/, 400],
  [/_(UNAUTHORIZED|FORBIDDEN|NOT_RESUMABLE)$/, 403],
  [/_(CONFLICT|LOCKED)$/, 409],
  [/_CORRUPT(_[A-Z]+)*$/, 422],
  [/_UNAVAILABLE$/, 503],
]

/** 5xx answers that are the host's configuration working as intended, not faults to log. */
const EXPECTED_REFUSALS: ReadonlySet<string> = new Set(['API_SEARCH_UNAVAILABLE', 'API_TOO_MANY_STREAMS'])

export interface ErrorResponse {
  readonly status: number
  readonly body: ErrorBody
  /** True for faults the host should log (anything that is not the caller's mistake). */
  readonly serverFault: boolean
}

/**
 * Turns anything thrown by a handler into a typed `{ code, message }` answer.
 * dsh errors keep their code and message (they are written for people);
 * anything else becomes `API_INTERNAL` without internals in the message.
 */
export function toErrorResponse(error: unknown): ErrorResponse {
  if (error instanceof ApiError) return { status: error.status, body: error.toJSON(), serverFault: error.status >= 500 && !EXPECTED_REFUSALS.has(error.code) }
  if (isDshError(error)) {
    const status = SERVICE_STATUS[error.code] ?? SUFFIX_STATUS.find(([pattern]) => pattern.test(error.code))?.[1] ?? 500
    return { status, body: error.toJSON(), serverFault: status >= 500 }
  }
  return {
    status: 500,
    body: { code: 'API_INTERNAL', message: 'The host failed to answer this request; its log has the details.' },
    serverFault: true,
  }
}
