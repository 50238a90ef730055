import { ApiError } from './errors.js'

/**
 * Transport limits of one server; every field has a default. Limits on what a
 * request may ask for (page sizes, id and search lengths, search terms) are
 * not here: they are the shared protocol limits of `@dsh/protocol`.
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
}

export const DEFAULT_LIMITS: ApiLimits = Object.freeze({
  maxUrlLength: 16 * 1024,
  maxBodyBytes: 64 * 1024,
  maxStreams: 64,
  maxStreamBacklogBytes: 1024 * 1024,
  heartbeatMs: 15_000,
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
  return Object.freeze(limits)
}
