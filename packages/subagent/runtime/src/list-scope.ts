import { setMaxListeners } from 'node:events'
import { throwIfAborted } from '@dsh/context'
import { cancelled } from './errors.js'

/**
 * The cancellation of one listing.
 *
 * Invariant: a listing adds exactly one listener to its caller's signal,
 * whatever its concurrency, and removes it when it settles (`close`). Every
 * read below the listing gets the scope's own signal instead, which the
 * caller's abort aborts; that signal lives only as long as the listing, so
 * the listeners reads add to it are not capped.
 *
 * Every read is checked before and after, and a read that settles only after
 * the abort is rejected: the listing rejects with `CANCELLED`.
 */
export class ListingScope {
  readonly #controller = new AbortController()
  readonly #caller: AbortSignal | undefined
  readonly #onAbort = (): void => this.#controller.abort()
  readonly #aborted: Promise<never>
  readonly #rejectAborted: () => void

  constructor(caller: AbortSignal | undefined) {
    throwIfAborted(caller, cancelled)
    this.#caller = caller
    setMaxListeners(0, this.#controller.signal)
    caller?.addEventListener('abort', this.#onAbort, { once: true })
    let rejectAborted = (): void => {}
    this.#aborted = new Promise<never>((_resolve, reject) => {
      rejectAborted = () => reject(cancelled())
    })
    this.#rejectAborted = rejectAborted
    this.#controller.signal.addEventListener('abort', rejectAborted, { once: true })
    this.#aborted.catch(() => {})
  }

  /** The signal handed to every read of the listing. */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  get aborted(): boolean {
    return this.#controller.signal.aborted || this.#caller?.aborted === true
  }

  /** Throws `CANCELLED` once the caller has aborted. */
  check(): void {
    if (this.aborted) throw cancelled()
  }

  /** Runs one read under the scope: checked before and after, rejected as soon as the caller aborts. */
  async read<T>(op: (signal: AbortSignal) => Promise<T>): Promise<T> {
    this.check()
    const result = await Promise.race([op(this.#controller.signal), this.#aborted])
    this.check()
    return result
  }

  /**
   * Removes the listener from the caller's signal and stops reads still in
   * flight. The listing has settled, so what a read still in flight rejects
   * with decides nothing, and no `CANCELLED` error is built for it.
   */
  close(): void {
    this.#caller?.removeEventListener('abort', this.#onAbort)
    this.#controller.signal.removeEventListener('abort', this.#rejectAborted)
    this.#controller.abort()
  }

  /** Runs `body` in a new scope over `caller`, closing it however `body` settles. */
  static async run<T>(caller: AbortSignal | undefined, body: (scope: ListingScope) => Promise<T>): Promise<T> {
    const scope = new ListingScope(caller)
    try {
      return await body(scope)
    } finally {
      scope.close()
    }
  }
}
