import type { DshError } from '@dsh/context'

/**
 * Characters (UTF-16 units) one model step may stream, its text, reasoning,
 * tool names and arguments together. A step's text goes whole into one
 * `assistant/message` (an Anthropic step's tool inputs twice, parsed and
 * raw), and a store refuses an event over `EVENT_MAX_BYTES` (16 MiB): a
 * session holding one could never be persisted again. At 6 bytes a
 * character (a JSON `\u` escape), twice over, this stays below it; the
 * longest answers models give (128k output tokens) are a fraction of it.
 */
export const STEP_MAX_CHARS = 1_048_576

/** Tool calls (Chat's `index`, Responses' function call items) or content blocks (Anthropic's `index`) one step may hold. */
export const STEP_MAX_PARTS = 256

/** The typed errors a bound throws, in the driver's own class. */
export interface StepBoundErrors {
  /** Past a bound (`…_RESPONSE_TOO_LARGE`). */
  readonly tooLarge: (message: string) => DshError
  /** A stream that breaks the protocol (`…_REQUEST_FAILED`). */
  readonly malformed: (message: string) => DshError
}

/** Counts what one streamed step holds and throws the driver's typed error past `STEP_MAX_CHARS` or `STEP_MAX_PARTS`. */
export class StepBound {
  readonly #errors: StepBoundErrors
  #chars = 0

  constructor(errors: StepBoundErrors) {
    this.#errors = errors
  }

  /** Counts `text` against the step's characters; call it before the text is kept or passed on. */
  take(text: string): void {
    this.#chars += text.length
    if (this.#chars > STEP_MAX_CHARS) {
      throw this.#errors.tooLarge(
        `The model's response passed ${STEP_MAX_CHARS} characters in one step (STEP_MAX_CHARS), more than one logged event may hold; it was stopped there. Lower max_tokens or ask for a shorter answer.`,
      )
    }
  }

  /** A part's position as the server sent it: an integer from 0 below `STEP_MAX_PARTS`. */
  part(index: unknown, what: string): number {
    if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0) {
      throw this.#errors.malformed(
        `The model server sent a ${what} index that is not a non-negative integer: ${String(index).slice(0, 40)}.`,
      )
    }
    if (index >= STEP_MAX_PARTS) {
      throw this.#errors.tooLarge(`The model's response held more than ${STEP_MAX_PARTS} ${what}s in one step (STEP_MAX_PARTS).`)
    }
    return index
  }
}

/** A request's own signal: aborted by the caller's, or once the server has sent nothing for `ms`. */
export interface RequestDeadline {
  readonly signal: AbortSignal
  /** Something arrived from the server (a streamed chunk): the `ms` start again. */
  progress(): void
  /** Whether the time ran out (and the caller had not aborted first). */
  expired(): boolean
  /** Stops the timer (call it when the request settles). */
  clear(): void
}

/**
 * A deadline over the silences of one request: until its response headers,
 * and between its streamed chunks (an SDK's own `timeout` ends when the
 * headers arrive, so a server that stalls mid-stream would hold a turn for
 * ever). It restarts at every chunk (`progress`), so a long answer that keeps
 * streaming is never cut: what bounds a step's length is `STEP_MAX_CHARS`.
 * A fresh signal per request also keeps the SDK's abort listener off the
 * caller's signal, which would otherwise collect one per step.
 */
export function requestDeadline(caller: AbortSignal, ms: number): RequestDeadline {
  const timer = new AbortController()
  let expired = false
  const handle = setTimeout(() => {
    expired = !caller.aborted
    timer.abort()
  }, ms)
  return {
    signal: AbortSignal.any([caller, timer.signal]),
    progress: () => {
      if (!timer.signal.aborted) handle.refresh()
    },
    expired: () => expired,
    clear: () => clearTimeout(handle),
  }
}
