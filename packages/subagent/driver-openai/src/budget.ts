import type { CompactionService, MaybeCompactResult } from '@dsh/compaction'
import type { Session } from '@dsh/session'

/** The `compaction` service, or a getter for it (it may be provided after the driver). */
export type CompactionSource = CompactionService | (() => CompactionService | undefined)

export interface BudgetCompactionOptions {
  /** The `compaction` service, or a getter for it (it may be provided after the driver). */
  readonly compaction: CompactionSource
  /** The model's context window, in tokens. */
  readonly window: number
  /** Compact at this fraction of the window (default the service's, 0.8). */
  readonly fraction?: number
  /** Context messages left verbatim (default the service's, 4). */
  readonly keep?: number
}

/** What one check did: the estimate and budget, and the compaction or the error that stopped it. */
export type BudgetCheck =
  | (MaybeCompactResult & { readonly error?: undefined })
  | { readonly estimate?: undefined; readonly budget?: undefined; readonly compaction?: undefined; readonly error: unknown }

/**
 * The budget trigger a step loop calls before it builds a model request:
 * compacts the session when its context's estimate reaches `window *
 * fraction`. It never throws: a failed compaction is returned (and written
 * to the log as `compaction/end {error}` by the service), and the request
 * goes ahead with the context as it is; without the service it does
 * nothing.
 */
export function budgetCompaction(
  options: BudgetCompactionOptions,
): (session: Session, signal?: AbortSignal) => Promise<BudgetCheck | undefined> {
  const service = typeof options.compaction === 'function' ? options.compaction : () => options.compaction as CompactionService
  return async (session, signal) => {
    const compaction = service()
    if (compaction === undefined) return undefined
    try {
      return await compaction.maybeCompact(session, {
        window: options.window,
        ...(options.fraction === undefined ? {} : { fraction: options.fraction }),
        ...(options.keep === undefined ? {} : { keep: options.keep }),
        ...(signal === undefined ? {} : { signal }),
      })
    } catch (error) {
      return { error }
    }
  }
}
