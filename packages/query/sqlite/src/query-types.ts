import type { Context, Logger } from '@dsh/context'
import type { SessionPersistence } from '@dsh/session-persistence'
import type {
  EventSearchHit,
  IndexProgress,
  LiveSessions,
  SearchPage,
  SearchRequest,
  SessionQuery,
  SessionSearchHit,
} from '@dsh/session-query'
import type { StatementBudget } from './budget.js'
import type { RebuildReason } from './schema.js'

export interface SqliteSessionQueryOptions {
  readonly sessions: LiveSessions
  readonly persistence: SessionPersistence
  /** The index file, e.g. `<root>/.dsh/index.sqlite` (see `defaultIndexPath`). Created when missing. */
  readonly path: string
  /** Progress of rebuilds and reconciliations (header scan, then body indexing). */
  readonly onProgress?: (progress: IndexProgress) => void
  /**
   * A context whose `session/disposed` events this backend follows, so that a
   * session going cold in this process is noticed even between two queries.
   * Without it, sessions that leave the store are noticed at the next query.
   */
  readonly context?: Pick<Context, 'on'>
  /** Reconcile with persistence before the factory resolves (default true). */
  readonly reconcileOnOpen?: boolean
  /**
   * Run SQLite's `quick_check` over the whole file on open (default false:
   * for `dsh verify` and `dsh reindex`, not for every command). See also
   * `checkIndex()`.
   */
  readonly check?: boolean
  /**
   * When set, a query finding the last full reconciliation older than this
   * many milliseconds reconciles first (picks up other processes' writes).
   * Default: only on open and on `reconcile()`.
   */
  readonly maxStalenessMs?: number
  /** Concurrent body reads while reconciling (default 4). */
  readonly readConcurrency?: number
  /**
   * What each request-serving statement (a listing page, a search page) may
   * spend: `{ ms, rows? }`, default 5,000 ms and no row cap. Past it the
   * statement is stopped and the request fails with
   * `SESSION_QUERY_BUDGET_EXCEEDED`.
   */
  readonly budget?: StatementBudget
  /**
   * Run request-serving statements in a worker thread over a second,
   * query-only connection (default false): a slow statement then delays only
   * its own request, never the event loop, and `close()` does not wait for
   * it. Index upkeep (reconciliation) stays on the calling thread.
   */
  readonly worker?: boolean
  /** Where fail-soft index problems are reported (default: the console). */
  readonly logger?: Logger
  /** Cancels the reconciliation on open. */
  readonly signal?: AbortSignal
}

/** What one reconciliation did. */
export interface ReconcileReport {
  /** Set when the index was built from nothing, and why. */
  readonly rebuild?: RebuildReason
  /**
   * `'feed'`: the persistence change feed named what changed since the
   * index's cursor (nothing else was looked at); `'rescan'`: the feed could
   * not prove that, so every header was listed once.
   */
  readonly source: 'feed' | 'rescan'
  /** Records persistence listed (a rescan; 0 when the feed answered). */
  readonly listed: number
  /** Ids the change feed named (0 on a rescan). */
  readonly changed: number
  /** Logs read (new or changed revisions; attempts, failures included): only their new batches when the indexed prefix still holds. */
  readonly read: number
  /** Of `read`, logs whose indexed text no longer matched (re-created or rewritten under the same id): indexed again from nothing. */
  readonly readWhole: number
  /** Rows removed because their session is no longer persisted. */
  readonly removed: number
  /** Logs that could not be read because they are corrupt (they still list). */
  readonly corrupt: number
  /** Logs whose read failed otherwise; retried by the next reconciliation. */
  readonly failed: number
}

/** The outcome of `checkIndex()`. */
export type IndexCheck = { readonly ok: true } | { readonly ok: false; readonly problem: string; readonly rebuilt: ReconcileReport }

/** Counters of request-serving statements, for tests and benchmarks (counts, never times). */
export interface IndexReadMetrics {
  /** Requests run (each one read transaction of one or two statements). */
  readonly requests: number
  /** Candidate rows the last request stepped through (`dsh_budget` calls). */
  readonly lastRowsStepped: number
  /** Requests stopped by their budget. */
  readonly budgetExceeded: number
  /** Requests posted to the worker and not yet answered (0 without `worker`). */
  readonly inFlight: number
}

/** The SQLite-indexed `sessionQuery` backend. */
export interface SqliteSessionQuery extends SessionQuery {
  readonly path: string
  readonly metrics: IndexReadMetrics
  searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>>
  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>>
  /** Brings the index up to date with every persisted revision: reads only logs whose revision changed. */
  reconcile(signal?: AbortSignal): Promise<ReconcileReport>
  /** Deletes the index file and builds it again from persistence. */
  rebuild(signal?: AbortSignal): Promise<ReconcileReport>
  /**
   * Runs SQLite's `quick_check` over the index file (for `dsh verify`): `ok`
   * when sound; otherwise the problem, and the index is rebuilt at once.
   */
  checkIndex(signal?: AbortSignal): Promise<IndexCheck>
  close(): Promise<void>
}
