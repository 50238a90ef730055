/** Codes the client raises itself; every other code is the server's (e.g. `API_UNAUTHORIZED`, `SESSION_QUERY_NOT_FOUND`). */
export type ClientLocalErrorCode =
  /** The server answered something that is not the documented JSON shape. */
  | 'CLIENT_INVALID_RESPONSE'
  /** The request never got an HTTP answer (connection refused, reset, DNS). */
  | 'CLIENT_NETWORK'
  /** An argument cannot be sent as given (an empty, dot-segment or over-long id, a value past a protocol limit, a bad base URL). */
  | 'CLIENT_INVALID_ARGUMENT'
  /** The answer was a redirect. The dsh host never redirects, so none is followed (the token never travels elsewhere). */
  | 'CLIENT_REDIRECT_REFUSED'
  /** One event-stream message grew past `maxEventSize` before it ended; the stream is closed. */
  | 'CLIENT_STREAM_TOO_LARGE'
  /** An answer body passed `maxResponseBytes`; the rest was not read. */
  | 'CLIENT_RESPONSE_TOO_LARGE'
  /** The caller's AbortSignal aborted. */
  | 'CANCELLED'

/**
 * The one error class of `@dsh/client`. `status` is the HTTP status of the
 * answer, or 0 when there was none; `code` is the server's typed error code
 * passed through, or one of the client's own codes.
 */
export class ClientError extends Error {
  readonly code: string
  readonly status: number

  constructor(code: string, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'ClientError'
    this.code = code
    this.status = status
  }

  toJSON(): { code: string; status: number; message: string } {
    return { code: this.code, status: this.status, message: this.message }
  }
}

/** True when `error` is a ClientError, optionally with one of `codes`. */
export function isClientError(error: unknown, ...codes: string[]): error is ClientError {
  return error instanceof ClientError && (codes.length === 0 || codes.includes(error.code))
}
