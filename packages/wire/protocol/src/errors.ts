export type ProtocolErrorCode =
  /** A path parameter or query value cannot be put on the wire as given. */
  'PROTOCOL_INVALID_ARGUMENT'

/**
 * The one error class of `@dsh/protocol`, raised when a request cannot be
 * built from the route table. It extends `Error` (not `DshError`) because this
 * package depends on zod alone, so browsers and thin clients can load it.
 */
export class ProtocolError extends Error {
  readonly code: ProtocolErrorCode

  constructor(code: ProtocolErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'ProtocolError'
    this.code = code
  }
}
