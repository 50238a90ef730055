import { DshError } from '@dsh/context'
import type { ResponseUsage } from './usage.js'

export type DriverOpenAIErrorCode =
  /** An option is malformed (base URL, model, retry policy, step limit). Fix the configuration; retrying cannot help. */
  | 'DRIVER_OPENAI_INVALID_OPTIONS'
  /** No API key: neither the `apiKey` option nor `DSH_API_KEY` / `OPENAI_API_KEY` is set. */
  | 'DRIVER_OPENAI_NO_API_KEY'
  /** The server rejected the request (HTTP 400/422): a bad model name, context too long, malformed tools. Not retried. */
  | 'DRIVER_OPENAI_BAD_REQUEST'
  /** The server refused the key (HTTP 401/403). Not retried. */
  | 'DRIVER_OPENAI_UNAUTHORIZED'
  /** The model or route does not exist at the base URL (HTTP 404). Not retried. */
  | 'DRIVER_OPENAI_NOT_FOUND'
  /** Still rate limited (HTTP 429) after every allowed attempt. */
  | 'DRIVER_OPENAI_RATE_LIMITED'
  /** The server kept failing (HTTP 5xx) after every allowed attempt. */
  | 'DRIVER_OPENAI_UNAVAILABLE'
  /** The server could not be reached (or the connection broke) after every allowed attempt. */
  | 'DRIVER_OPENAI_CONNECTION'
  /** Any other HTTP status, a stream that broke after output was already recorded, or one that ended unfinished or malformed. */
  | 'DRIVER_OPENAI_REQUEST_FAILED'
  /** One step's response passed the driver's bounds (`STEP_MAX_CHARS` characters, `STEP_MAX_PARTS` tool calls). Not retried. */
  | 'DRIVER_OPENAI_RESPONSE_TOO_LARGE'
  /** The model kept calling tools past the turn's step limit. */
  | 'DRIVER_OPENAI_MAX_STEPS'
  /** The caller aborted the turn. */
  | 'CANCELLED'

/** The one error class of `@dsh/driver-openai`. Messages never contain the API key. */
export class DriverOpenAIError extends DshError<DriverOpenAIErrorCode> {
  /**
   * The usage the server reported for a model call before it failed or was
   * cancelled (a Chat usage chunk, a Responses event's usage): its tokens
   * were spent, so `step/end` records them. Undefined when it reported none.
   */
  declare usage?: ResponseUsage
}
