import {
  CURSOR_MAX_LENGTH,
  HISTORY_PAGE_MAX_BYTES,
  HTTP_HEADERS_TIMEOUT_MS,
  HTTP_IDLE_TIMEOUT_MS,
  HTTP_MAX_CONNECTIONS,
  HTTP_REQUEST_TIMEOUT_MS,
  ID_MAX_LENGTH,
  PARAM_MAX_LENGTH,
  SEARCH_MAX_TEXT,
} from '@dsh/protocol/limits'
import { ApiError } from './errors.js'

/**
 * Transport limits of one server; every field has a default (the connection
 * ones are declared in `@dsh/protocol/limits`). Limits on what a request may
 * ask for (page sizes, id and search lengths, search terms) are not here: they
 * are the shared protocol limits of `@dsh/protocol`.
 */
export interface ApiLimits {
  /** Longest accepted request target (path + query), in bytes as sent. Longer → 414. */
  readonly maxUrlLength: number
  /** Largest request body accepted; the API takes no bodies, so anything above this is refused with 413. */
  readonly maxBodyBytes: number
  /** Concurrent SSE streams per server. */
  readonly maxStreams: number
  /** Bytes an SSE stream may have queued unread before it is closed. */
  readonly maxStreamBacklogBytes: number
  /** Milliseconds between SSE keep-alive comments. */
  readonly heartbeatMs: number
  /** Connections held open at once (event streams included); one more is answered `503 API_TOO_MANY_CONNECTIONS` and closed. */
  readonly maxConnections: number
  /** Milliseconds an idle keep-alive connection is held between requests before it is closed. */
  readonly idleTimeoutMs: number
  /** Milliseconds a client has to send a request's headers (from connecting, or from a later request's first byte); past it → 408 and close. */
  readonly headersTimeoutMs: number
  /** Milliseconds a client has to send a whole request; past it → 408 and close. At least `headersTimeoutMs`. */
  readonly requestTimeoutMs: number
  /** Bytes of events' JSON one history page holds at most (`capHistoryPage`); an event alone over it is answered elided. */
  readonly maxHistoryPageBytes: number
  /** Reads (GET, HEAD) answered at once (read and built), all connections together; the others wait their turn. A POST takes no turn. */
  readonly maxConcurrentRequests: number
  /** Requests one connection may have waiting behind the one being answered (pipelined); one more closes the connection. */
  readonly maxPipelined: number
  /** Milliseconds an answer may wait, written, for its client to take it; past it the connection is closed. */
  readonly drainTimeoutMs: number
  /** Bytes of answers written and not yet taken by their clients, all connections together; past it a new answer is `503 API_BUSY`. */
  readonly maxQueuedBytes: number
}

/** Bytes one UTF-16 unit takes at most in a URL: a BMP character is three UTF-8 bytes, each escaped as `%XX`. */
const ESCAPED_UNIT_BYTES = 9

/**
 * The default `maxUrlLength`: every request the protocol's limits allow fits,
 * however its characters are escaped. No route takes more than two ids (a
 * child's history), a free-text parameter (a cwd), a search text and a cursor
 * (base64url: never escaped); their sum, with 4 KiB for the rest (names,
 * numbers, the path), is 84,776 bytes.
 */
const URL_MAX_BYTES = ESCAPED_UNIT_BYTES * (2 * ID_MAX_LENGTH + PARAM_MAX_LENGTH + SEARCH_MAX_TEXT) + CURSOR_MAX_LENGTH + 4096

export const DEFAULT_LIMITS: ApiLimits = Object.freeze({
  maxUrlLength: URL_MAX_BYTES,
  maxBodyBytes: 64 * 1024,
  maxStreams: 64,
  maxStreamBacklogBytes: 1024 * 1024,
  heartbeatMs: 15_000,
  maxConnections: HTTP_MAX_CONNECTIONS,
  idleTimeoutMs: HTTP_IDLE_TIMEOUT_MS,
  headersTimeoutMs: HTTP_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: HTTP_REQUEST_TIMEOUT_MS,
  maxHistoryPageBytes: HISTORY_PAGE_MAX_BYTES,
  maxConcurrentRequests: 8,
  maxPipelined: 16,
  drainTimeoutMs: 60_000,
  // Eight history pages of the largest size.
  maxQueuedBytes: 8 * HISTORY_PAGE_MAX_BYTES,
})

/** Fills in defaults and refuses nonsensical limits early, at server creation. */
export function resolveLimits(overrides: Partial<ApiLimits> = {}): ApiLimits {
  for (const name of Object.keys(overrides)) {
    if (!Object.hasOwn(DEFAULT_LIMITS, name)) {
      throw new ApiError(
        'API_INVALID_OPTIONS',
        `limits.${name} is not a limit of this server (page sizes and search bounds are the shared protocol limits of @dsh/protocol).`,
      )
    }
  }
  const limits = { ...DEFAULT_LIMITS, ...overrides }
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new ApiError('API_INVALID_OPTIONS', `limits.${name} must be a positive integer, got ${String(value)}.`)
  }
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    throw new ApiError(
      'API_INVALID_OPTIONS',
      `limits.headersTimeoutMs (${limits.headersTimeoutMs}) must not exceed limits.requestTimeoutMs (${limits.requestTimeoutMs}): the headers are part of the request.`,
    )
  return Object.freeze(limits)
}
