import type { Context, Logger } from '@dsh/context'
import type { Session } from '@dsh/session'
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
import type { ColdLimit } from './cold-sessions.js'
import type { RebuildReason } from './schema.js'

export interface SqliteSessionQueryOptions {
  /**
   * The live sessions (the `sessions` store). A writer indexes them from
   * memory once `flush` made their events durable; without `flush` it reads
   * their logs instead.
   */
  readonly sessions: LiveSessions & { flush?(session: Session): Promise<void> }
  readonly persistence: SessionPersistence
  /** The index path, e.g. `<root>/.dsh/index.sqlite` (see `defaultIndexPath`). A writer creates it when missing. */
  readonly path: string
  /**
   * Open the index for reading only (default false: this query is the
   * index's writer). A reader never creates, writes or removes a file, on a
   * read-only file system too: a missing, damaged, locked or unreadable index
   * makes listings read the logs and searches fail with
   * `SESSION_QUERY_INDEX_UNAVAILABLE`, and what changed since the index's
   * cursor is taken from the logs (an overlay of O(changes)).
   */
  readonly readOnly?: boolean
  /**
   * How many changes behind an index may be and still answer with an
   * overlay (default 1,000). Past it a listing reads every header
   * (`persistence.list()`) and a search fails with
   * `SESSION_QUERY_INDEX_UNAVAILABLE`.
   */
  readonly overlayLimit?: number
  /**
   * A writer indexes what changed this many milliseconds after the first
   * change it has not taken yet (default 200), off the append path, in
   * batches; and everything on `close()`. Needs `context`.
   */
  readonly indexDelayMs?: number
  /**
   * How much of the sessions that went cold here a writer keeps in memory
   * until a pass indexes them (default 1,000 sessions and 100,000 events in
   * all). While the index cannot be written they wait there; past either
   * bound the oldest are dropped, and the pass that indexes them reads them
   * from their logs instead (the change feed names them either way).
   */
  readonly coldLimit?: ColdLimit
  /** Progress of rebuilds and reconciliations (header scan, then body indexing). */
  readonly onProgress?: (progress: IndexProgress) => void
  /**
   * A context whose `session/event` and `session/disposed` events a writer
   * follows: it indexes each batch of changes `indexDelayMs` after it began,
   * and a session gone cold from memory. Without it, a writer indexes at
   * `reconcile()`, before a search and on `close()`.
   */
  readonly context?: Pick<Context, 'on'>
  /** A writer brings the index up to date before the factory resolves (default true). */
  readonly reconcileOnOpen?: boolean
  /**
   * A writer runs SQLite's `quick_check` over the whole file on open and
   * rebuilds it when it fails (default false: for `dsh verify` and `dsh
   * reindex`, not for every command). See also `checkIndex()`.
   */
  readonly check?: boolean
  /**
   * When set, a writer's query finding its last pass older than this many
   * milliseconds brings the index up to date first (other processes'
   * writes are answered through the overlay either way).
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
  /** Sessions this process holds, indexed from memory after a flush (no log read). */
  readonly fromMemory: number
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
/** `checkIndex`'s answer: sound, or the problem and, from a writer, the rebuild it made (a reader changes nothing). */
export type IndexCheck = { readonly ok: true } | { readonly ok: false; readonly problem: string; readonly rebuilt?: ReconcileReport }

/** Counters of request-serving statements and of what a writer holds, for tests and benchmarks (counts, never times). */
export interface IndexReadMetrics {
  /** Requests run (each one read transaction of one or two statements). */
  readonly requests: number
  /** Candidate rows the last request stepped through (`dsh_budget` calls). */
  readonly lastRowsStepped: number
  /** Requests stopped by their budget. */
  readonly budgetExceeded: number
  /** Requests posted to the worker and not yet answered (0 without `worker`). */
  readonly inFlight: number
  /** Sessions that went cold here and wait in memory for a pass to index them (at most `coldLimit.sessions`). */
  readonly coldSessions: number
  /** Events of those sessions, inherited prefixes included (at most `coldLimit.events`). */
  readonly coldEvents: number
  /** Cold sessions dropped for the bound since the index was opened: a pass reads them from their logs. */
  readonly coldDropped: number
}

/** The SQLite-indexed `sessionQuery` backend. */
export interface SqliteSessionQuery extends SessionQuery {
  readonly path: string
  readonly metrics: IndexReadMetrics
  searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>>
  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>>
  /**
   * A writer brings the index up to date with every persisted revision
   * (reads only logs whose revision changed). A reader writes nothing and
   * reports in `changed` how many sessions the index is behind on.
   */
  reconcile(signal?: AbortSignal): Promise<ReconcileReport>
  /** Builds the index again from persistence into a new file and swaps it in (the old one answers readers until then). */
  rebuild(signal?: AbortSignal): Promise<ReconcileReport>
  /**
   * Runs SQLite's `quick_check` over the index file (for `dsh verify`): `ok`
   * when sound; otherwise the problem, and a writer rebuilds the index at
   * once (into a new file, swapped in). A reader (`readOnly`) reports the
   * problem and leaves the file as it is.
   */
  checkIndex(signal?: AbortSignal): Promise<IndexCheck>
  close(): Promise<void>
}
