import { DriverOpenAIError } from './errors.js'

/**
 * Retries of one model request. Only 408, 409, 429, 5xx and connection
 * failures are retried, and only while the failed attempt recorded nothing
 * (a stream that broke after its first delta is an error, so no delta is
 * ever logged twice).
 */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 4). */
  readonly maxAttempts?: number
  /**
   * Waits before attempt `attempt + 1` (`attempt` counts from 1). Injectable
   * so tests never sleep. Default: {@link defaultBackoff}. Must settle (or
   * reject) promptly when `signal` aborts.
   */
  readonly backoff?: (attempt: number, retryAfterMs: number | undefined, signal: AbortSignal) => Promise<void>
}

export const DEFAULT_MAX_ATTEMPTS = 4
const MAX_DELAY_MS = 30_000

/** Exponential backoff from 500 ms with full jitter, or the server's `retry-after`, capped at 30 s; abortable. */
export function defaultBackoff(attempt: number, retryAfterMs: number | undefined, signal: AbortSignal): Promise<void> {
  const exponential = 500 * 2 ** (attempt - 1)
  const ms = Math.min(MAX_DELAY_MS, retryAfterMs ?? Math.round(exponential / 2 + (Math.random() * exponential) / 2))
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
}

export function checkRetryPolicy(policy: RetryPolicy | undefined): Required<RetryPolicy> {
  const maxAttempts = policy?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 20) {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_INVALID_OPTIONS',
      `retry.maxAttempts must be an integer from 1 to 20, got ${String(maxAttempts)}.`,
    )
  }
  return { maxAttempts, backoff: policy?.backoff ?? defaultBackoff }
}

/** `retry-after-ms`, else `retry-after` (seconds or an HTTP date), in ms; undefined when absent or unreadable. */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  if (headers === undefined) return undefined
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '')
  if (Number.isFinite(ms) && ms >= 0) return ms
  const value = headers.get('retry-after')
  if (value === null) return undefined
  const seconds = Number.parseFloat(value)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
  const date = Date.parse(value)
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined
}

export function isRetryableStatus(status: number | undefined): boolean {
  return status === 408 || status === 409 || status === 429 || (status !== undefined && status >= 500)
}
