import { defaultBackoff, type RetryPolicy } from '@dsh/driver-openai'
import { DriverAnthropicError } from './errors.js'

export type { RetryPolicy }

export const DEFAULT_MAX_ATTEMPTS = 4

/**
 * The retry policy with its defaults (4 attempts; exponential backoff with
 * jitter, or the server's `retry-after`/`retry-after-ms`, capped at 30 s).
 * The backoff is injectable so tests never sleep.
 */
export function checkRetryPolicy(policy: RetryPolicy | undefined): Required<RetryPolicy> {
  const maxAttempts = policy?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 20) {
    throw new DriverAnthropicError(
      'DRIVER_ANTHROPIC_INVALID_OPTIONS',
      `retry.maxAttempts must be an integer from 1 to 20, got ${String(maxAttempts)}.`,
    )
  }
  return { maxAttempts, backoff: policy?.backoff ?? defaultBackoff }
}
