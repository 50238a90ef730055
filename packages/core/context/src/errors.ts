/**
 * The base of every dsh error: a stable machine-readable `code` plus a
 * message a person can act on. Each package extends it once with its own code
 * union, so `error.code` is typed where the package is known and still
 * readable as a string everywhere else.
 */
export class DshError<Code extends string = string> extends Error {
  readonly code: Code
  readonly details: Readonly<Record<string, unknown>> | undefined

  constructor(code: Code, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = code
    this.details = options?.details === undefined ? undefined : Object.freeze({ ...options.details })
  }

  toJSON(): { code: string; message: string } {
    return { code: this.code, message: this.message }
  }
}

/** True when `error` is a dsh error, optionally with one of `codes`. */
export function isDshError(error: unknown, ...codes: string[]): error is DshError {
  return error instanceof DshError && (codes.length === 0 || codes.includes(error.code))
}

export type ContextErrorCode = 'CONTEXT_SERVICE_UNAVAILABLE' | 'CONTEXT_SERVICE_CONFLICT' | 'CONTEXT_DISPOSED' | 'CANCELLED'

export class ContextError extends DshError<ContextErrorCode> {}
