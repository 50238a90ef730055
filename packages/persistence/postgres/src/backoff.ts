/** The first delay of a background retry after a failure (ms). */
export const RETRY_FIRST_MS = 50
/** The longest delay between two background retries (ms): a server that returns is seen again within it. */
export const RETRY_CAP_MS = 2_000

/** The delay before retry number `failures` (1 for the first): doubling from {@link RETRY_FIRST_MS}, capped at {@link RETRY_CAP_MS}. */
export function retryDelay(failures: number): number {
  return Math.min(RETRY_CAP_MS, RETRY_FIRST_MS * 2 ** Math.min(Math.max(failures - 1, 0), 30))
}

/**
 * The retry schedule of one background loop (a LISTEN to re-open, a mirror
 * to refresh): after each failure `retry` runs once more, after a delay that
 * doubles per consecutive failure up to a cap — never a tight loop, and never
 * more than one retry pending. A success resets the streak. The timer is
 * unref'd: a pending retry never keeps the process alive.
 */
export class Backoff {
  readonly #retry: () => void
  #failures = 0
  #timer: NodeJS.Timeout | undefined
  #stopped = false

  /** `retry` must not throw; it reports its own outcome with `failed` or `succeeded`. */
  constructor(retry: () => void) {
    this.#retry = retry
  }

  /** Consecutive failures since the last success (1 on the first failure of a streak). */
  get failures(): number {
    return this.#failures
  }

  /** Whether a retry is waiting for its delay. */
  get pending(): boolean {
    return this.#timer !== undefined
  }

  /** Counts a failure and schedules one retry; a failure while a retry is pending changes nothing. */
  failed(): void {
    if (this.#stopped || this.#timer !== undefined) return
    this.#failures++
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      if (!this.#stopped) this.#retry()
    }, retryDelay(this.#failures))
    this.#timer.unref()
  }

  /** Ends the streak: the next failure waits the first delay again. */
  succeeded(): void {
    this.#failures = 0
  }

  /** No retry runs after this. */
  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
    this.#timer = undefined
  }
}
