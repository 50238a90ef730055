import { ApiError } from './errors.js'

/** Request size and parameter limits; every field has a default. */
export interface ApiLimits {
  /** Longest accepted request target (path + query), in bytes as sent. Longer → 414. */
  readonly maxUrlLength: number
  /** Longest id after percent-decoding, in UTF-16 code units. */
  readonly maxIdLength: number
  /** Longest query parameter value after decoding (ids have their own limit). */
  readonly maxParamLength: number
  /** Largest request body accepted; the API takes no bodies, so anything above this is refused with 413. */
  readonly maxBodyBytes: number
  /** Largest page a caller may ask for (`limit`). */
  readonly maxPageSize: number
  /** Page size when the caller gives no `limit`. */
  readonly defaultPageSize: number
  /** Concurrent SSE streams per server. */
  readonly maxStreams: number
  /** Bytes an SSE stream may have queued unread before it is closed. */
  readonly maxStreamBacklogBytes: number
  /** Milliseconds between SSE keep-alive comments. */
  readonly heartbeatMs: number
}

export const DEFAULT_LIMITS: ApiLimits = Object.freeze({
  maxUrlLength: 16 * 1024,
  maxIdLength: 1024,
  maxParamLength: 4096,
  maxBodyBytes: 64 * 1024,
  maxPageSize: 1000,
  defaultPageSize: 100,
  maxStreams: 64,
  maxStreamBacklogBytes: 1024 * 1024,
  heartbeatMs: 15_000,
})

/** Fills in defaults and refuses nonsensical limits early, at server creation. */
export function resolveLimits(overrides: Partial<ApiLimits> = {}): ApiLimits {
  const limits = { ...DEFAULT_LIMITS, ...overrides }
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new ApiError('API_INVALID_OPTIONS', `limits.${name} must be a positive integer, got ${String(value)}.`)
    }
  }
  if (limits.defaultPageSize > limits.maxPageSize) {
    throw new ApiError('API_INVALID_OPTIONS', `limits.defaultPageSize (${limits.defaultPageSize}) must not exceed limits.maxPageSize (${limits.maxPageSize}).`)
  }
  return Object.freeze(limits)
}
