import { DshError } from '@dsh/context'
import type { AnthropicUsage } from './usage.js'

export type DriverAnthropicErrorCode =
  /** An option is malformed (base URL, model, token limits, thinking budget, retry policy, step limit). Fix the configuration; retrying cannot help. */
  | 'DRIVER_ANTHROPIC_INVALID_OPTIONS'
  /** No API key: neither the `apiKey` option nor `DSH_API_KEY` / `ANTHROPIC_API_KEY` is set. */
  | 'DRIVER_ANTHROPIC_NO_API_KEY'
  /** The API rejected the request (HTTP 400/413/422): a bad model name, a prompt too long, a thinking block it cannot verify. Not retried. */
  | 'DRIVER_ANTHROPIC_BAD_REQUEST'
  /** The API refused the key (HTTP 401/403). Not retried. */
  | 'DRIVER_ANTHROPIC_UNAUTHORIZED'
  /** The model or route does not exist at the base URL (HTTP 404). Not retried. */
  | 'DRIVER_ANTHROPIC_NOT_FOUND'
  /** Still rate limited (HTTP 429) after every allowed attempt. */
  | 'DRIVER_ANTHROPIC_RATE_LIMITED'
  /** Still overloaded (HTTP 529) after every allowed attempt. */
  | 'DRIVER_ANTHROPIC_OVERLOADED'
  /** The API kept failing (another HTTP 5xx) after every allowed attempt. */
  | 'DRIVER_ANTHROPIC_UNAVAILABLE'
  /** The API could not be reached (or the connection broke before any output) after every allowed attempt. */
  | 'DRIVER_ANTHROPIC_CONNECTION'
  /** Any other HTTP status, an `error` event inside the stream, a stream that broke after output was already recorded, or one that ended unfinished or malformed. */
  | 'DRIVER_ANTHROPIC_REQUEST_FAILED'
  /** One step's response passed the driver's bounds (`STEP_MAX_CHARS` characters, `STEP_MAX_PARTS` content blocks). Not retried. */
  | 'DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE'
  /** The model kept calling tools past the turn's step limit. */
  | 'DRIVER_ANTHROPIC_MAX_STEPS'
  /** The caller aborted the turn. */
  | 'CANCELLED'

/** The one error class of `@dsh/driver-anthropic`. Messages never contain the API key. */
export class DriverAnthropicError extends DshError<DriverAnthropicErrorCode> {
  /**
   * The usage the server reported for a model call before it failed or was
   * cancelled (a stream that broke after `message_start`): its tokens were
   * spent, so `step/end` records them. Undefined when it reported none.
   */
  declare usage?: AnthropicUsage
}
