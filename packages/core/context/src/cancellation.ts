import { DshError } from './errors.js'

/**
 * Throws `makeError()` (default: a `CANCELLED` error) when `signal` is
 * aborted. Reads call it before and after every await so that a read that
 * settles after an abort never resolves successfully.
 */
export function throwIfAborted(signal: AbortSignal | undefined, makeError: () => Error = cancelledError): void {
  if (signal?.aborted) throw makeError()
}

function cancelledError(): Error {
  return new DshError('CANCELLED', 'The operation was cancelled by its caller (AbortSignal aborted).')
}

/**
 * Races `promise` against `signal`: rejects with `makeError()` as soon as the
 * signal aborts, and also when the promise settles after the abort. The
 * underlying work is not stopped (it may be shared with other callers); only
 * this caller stops waiting.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined, makeError: () => Error = cancelledError): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) {
    promise.catch(() => {})
    return Promise.reject(makeError())
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(makeError())
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        if (signal.aborted) reject(makeError())
        else resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(signal.aborted ? makeError() : error)
      },
    )
  })
}
