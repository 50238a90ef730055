import { throwIfAborted } from '@dsh/context'
import { MCP_MAX_CONCURRENT_READS, MCP_MAX_WAITING_READS } from '@dsh/protocol/limits'
import { McpError } from './errors.js'
import { positiveOption } from './options.js'

/** How many read-tool calls one server answers at once, and how many wait for a turn. */
export interface McpReadLimits {
  /** Read calls being answered (read and built) at once (default `MCP_MAX_CONCURRENT_READS`, 8). */
  readonly maxConcurrentReads?: number
  /** Read calls waiting for a turn, in arrival order (default `MCP_MAX_WAITING_READS`, 64); one more is `MCP_BUSY`. */
  readonly maxWaitingReads?: number
}

interface Waiter {
  readonly start: () => void
  readonly onAbort: () => void
}

/** The `CANCELLED` error of `@dsh/context` for an aborted `signal`. */
function cancelled(signal: AbortSignal): unknown {
  try {
    throwIfAborted(signal)
  } catch (error) {
    return error
  }
  return undefined
}

/**
 * Turns for read-tool calls, so that a client that sends many calls without
 * waiting for answers holds a bounded amount: at most `maxConcurrentReads`
 * are read and built at once, at most `maxWaitingReads` wait their turn in
 * arrival order (holding only their arguments), and a call past both is
 * refused at once with `MCP_BUSY`. A waiting call whose signal aborts leaves
 * the line and never starts.
 */
export class ReadTurns {
  readonly maxConcurrentReads: number
  readonly maxWaitingReads: number
  #active = 0
  readonly #waiting: Waiter[] = []

  constructor(limits: McpReadLimits = {}) {
    this.maxConcurrentReads = positiveOption('maxConcurrentReads', limits.maxConcurrentReads, MCP_MAX_CONCURRENT_READS)
    this.maxWaitingReads = positiveOption('maxWaitingReads', limits.maxWaitingReads, MCP_MAX_WAITING_READS)
  }

  /** Read calls being answered now. */
  get active(): number {
    return this.#active
  }

  /** Read calls waiting for a turn. */
  get waiting(): number {
    return this.#waiting.length
  }

  /** Runs `call` in a turn: at once when one is free, else after the calls waiting before it. */
  async run<T>(signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    await this.#turn(signal)
    try {
      throwIfAborted(signal)
      return await call()
    } finally {
      this.#release()
    }
  }

  #turn(signal: AbortSignal): Promise<void> {
    throwIfAborted(signal)
    if (this.#active < this.maxConcurrentReads) {
      this.#active++
      return Promise.resolve()
    }
    if (this.#waiting.length >= this.maxWaitingReads) {
      throw new McpError(
        'MCP_BUSY',
        `${this.#active} read calls are being answered and ${this.#waiting.length} wait their turn, this server's caps (maxConcurrentReads ${this.maxConcurrentReads}, maxWaitingReads ${this.maxWaitingReads}); nothing was read. Wait for the answers to earlier calls, then try again.`,
        {
          details: {
            active: this.#active,
            waiting: this.#waiting.length,
            maxConcurrentReads: this.maxConcurrentReads,
            maxWaitingReads: this.maxWaitingReads,
          },
        },
      )
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          signal.removeEventListener('abort', waiter.onAbort)
          resolve()
        },
        onAbort: () => {
          const at = this.#waiting.indexOf(waiter)
          if (at !== -1) this.#waiting.splice(at, 1)
          reject(cancelled(signal))
        },
      }
      signal.addEventListener('abort', waiter.onAbort, { once: true })
      this.#waiting.push(waiter)
    })
  }

  /** Hands the turn to the longest waiting call, if any. */
  #release(): void {
    const next = this.#waiting.shift()
    if (next === undefined) this.#active--
    else next.start()
  }
}
