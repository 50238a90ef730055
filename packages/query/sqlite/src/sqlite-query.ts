import { type Context, consoleLogger, isDshError, type Logger } from '@dsh/context'
import { type Session, type SessionId, SessionLogOffset } from '@dsh/session'
import type { PersistedSessionRecord, SessionChanges, SessionPersistence, SessionSuffixObservation } from '@dsh/session-persistence'
import type {
  EventSearchHit,
  IndexProgress,
  LiveSessions,
  ParsedSearchRequest,
  SearchPage,
  SearchRequest,
  SessionListFilter,
  SessionListPage,
  SessionQuery,
  SessionQueryRecord,
  SessionSearchHit,
} from '@dsh/session-query'
import {
  checkAborted,
  fromPersistenceError,
  guarded,
  indexFetchLimit,
  indexListPage,
  listPersisted,
  parseListFilter,
  SessionQueryError,
  withLiveRevisions,
} from '@dsh/session-query/backend'
import { type BudgetedResult, createBudgetedReader, DEFAULT_BUDGET, type StatementBudget } from './budget.js'
import { IndexDamageError, IndexStore } from './index-store.js'
import { listedRecords, listStatement, type ReadStatement } from './read-statements.js'
import type { WorkerReader } from './reader-worker.js'
import { isDamage, openIndexFile, quickCheck, type RebuildReason, removeIndexFile } from './schema.js'
import type { EventHitRow } from './search.js'

// What a listing never needs is loaded the first time something else does
// (the module loader keeps it): `dsh sessions` then loads only the listing
// path. The shared rules of search, history and the in-memory scan; the
// search statements; the reader worker (worker mode only).
const sharedRules = () => import('@dsh/session-query')
const searchStatements = () => import('./search.js')
const readerWorker = () => import('./reader-worker.js')

/** What a search uses beyond the listing path, loaded at the first search. */
interface SearchModules {
  readonly rules: Awaited<ReturnType<typeof sharedRules>>
  readonly statements: Awaited<ReturnType<typeof searchStatements>>
}

export interface SqliteSessionQueryOptions {
  readonly sessions: LiveSessions
  readonly persistence: SessionPersistence
  /** The index file, e.g. `<root>/.index/query.sqlite` (see `defaultIndexPath`). Created when missing. */
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

/**
 * Opens (creating, or rebuilding when missing, corrupt or of an older schema)
 * the derived index at `options.path` and, unless disabled, reconciles it
 * with persistence before resolving.
 */
export async function createSqliteSessionQuery(options: SqliteSessionQueryOptions): Promise<SqliteSessionQuery> {
  const query = new SqliteQuery(options)
  try {
    await query.open(options.signal)
  } catch (error) {
    await query.close()
    throw error
  }
  return query
}

const WRITE_BATCH = 128

class SqliteQuery implements SqliteSessionQuery {
  readonly path: string
  readonly #sessions: LiveSessions
  readonly #persistence: SessionPersistence
  /** The in-memory scan a listing falls back on while the index is rebuilt or failing; made on first use. */
  #scan: Promise<SessionQuery> | undefined
  readonly #options: SqliteSessionQueryOptions
  readonly #logger: Logger
  #store: IndexStore | undefined
  #rebuildReason: RebuildReason | undefined
  /** Every index writer runs through this chain, one at a time. */
  #tail: Promise<unknown> = Promise.resolve()
  /** Set while the index is rebuilt after damage was found; listings scan meanwhile. */
  #rebuilding: Promise<unknown> | undefined
  /** The live sessions seen at the last query, to notice those that went cold. */
  #lastLive = new Map<string, Session>()
  /** Sessions that left the store since the last query: their rows need the persisted revision. */
  readonly #cold = new Map<string, Session>()
  #lastReconcile = 0
  readonly #unsubscribe: Array<() => void> = []
  readonly #lifetime = new AbortController()
  #closed = false
  #closing: Promise<void> | undefined
  readonly #budget: StatementBudget
  /** Set in worker mode (at open): request-serving reads go to the worker thread. */
  #worker: WorkerReader | undefined
  /** The budgeted runner on the main connection (inline mode); replaced with the store. */
  #inline: ReturnType<typeof createBudgetedReader> | undefined
  readonly #reads = { requests: 0, lastRowsStepped: 0, budgetExceeded: 0 }

  constructor(options: SqliteSessionQueryOptions) {
    this.path = options.path
    this.#options = options
    this.#sessions = options.sessions
    this.#persistence = options.persistence
    this.#logger = options.logger ?? consoleLogger
    this.#budget = options.budget ?? DEFAULT_BUDGET
    for (const session of options.sessions.list()) this.#lastLive.set(session.id, session)
    if (options.context !== undefined) {
      this.#unsubscribe.push(options.context.on('session/disposed', (session) => void this.#cold.set(session.id, session)))
    }
  }

  async open(signal: AbortSignal | undefined): Promise<void> {
    if (this.#options.worker === true) {
      const { WorkerReader } = await readerWorker()
      this.#worker = new WorkerReader(this.path, () => this.#closedError())
    }
    const opened = openIndexFile(this.path, { check: this.#options.check === true })
    this.#useStore(new IndexStore(opened.db))
    this.#rebuildReason = opened.rebuild
    // A missing file is the normal first run; damage and old schemas are worth a word.
    if (opened.rebuild !== undefined && opened.rebuild !== 'missing')
      this.#logger.warn(`dsh: the session query index at ${this.path} is being rebuilt (${opened.rebuild}).`)
    if (this.#options.reconcileOnOpen !== false) await this.reconcile(signal)
  }

  // ---------------------------------------------------------------- listing

  async listSessions(filter?: SessionListFilter, signal?: AbortSignal): Promise<SessionListPage> {
    checkAborted(signal)
    const parsed = parseListFilter(filter)
    await guarded(this.#beforeQuery(), signal)
    checkAborted(signal)
    const store = this.#store
    if (this.#rebuilding !== undefined || store === undefined) return (await this.#scanQuery()).listSessions(filter, signal)
    const live = this.#sessions.list()
    let persisted: SessionQueryRecord[]
    try {
      const [rows] = await this.#read([listStatement(parsed, indexFetchLimit(parsed, live.length))], 'listing', signal)
      persisted = listedRecords(rows!)
    } catch (error) {
      // Budget, cancellation and closing are answers; only a failing index falls back to a scan.
      if (isDshError(error)) throw error
      this.#indexFailed(error)
      return (await this.#scanQuery()).listSessions(filter, signal)
    }
    return indexListPage({ sessions: this.#sessions, persistence: this.#persistence }, parsed, persisted, live, signal)
  }

  // ------------------------------------------------------------ observations

  async observeSession(id: string, signal?: AbortSignal) {
    const { observe } = await sharedRules()
    return observe({ sessions: this.#sessions, persistence: this.#persistence }, id, signal)
  }

  async readHistory(id: string, request?: unknown, signal?: AbortSignal) {
    const { readHistoryOf } = await sharedRules()
    return readHistoryOf((i, s) => this.observeSession(i, s), id, request, signal)
  }

  async readWindow(id: string, request: unknown, signal?: AbortSignal) {
    const { readWindowOf } = await sharedRules()
    return readWindowOf((i, s) => this.observeSession(i, s), id, request, signal)
  }

  #scanQuery(): Promise<SessionQuery> {
    this.#scan ??= sharedRules().then(({ createSessionQuery }) =>
      createSessionQuery({ sessions: this.#sessions, persistence: this.#persistence }),
    )
    return this.#scan
  }

  // ----------------------------------------------------------------- search

  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>> {
    return this.#search(request, 'events', signal, (found, search) => {
      const rows = found as EventHitRow[]
      return {
        hits: rows
          .slice(0, search.limit)
          .map((row) => Object.freeze({ id: row.id as SessionId, seq: row.seq, type: row.type, snippet: row.snippet, score: -row.bm25 })),
        more: rows.length > search.limit,
      }
    })
  }

  searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>> {
    return this.#search(request, 'sessions', signal, (found, search, liveIds, { rules, statements }) => {
      const rows = statements.sessionHits(found, liveIds)
      const hits: SessionSearchHit[] = []
      for (const row of rows.slice(0, search.limit)) {
        const session = row.record === undefined ? this.#sessions.get(row.id) : undefined
        const record = row.record ?? (session === undefined ? undefined : rules.liveRecord(session, undefined))
        // A live session that left between the scan and now is gone from the corpus as well.
        if (record !== undefined) hits.push(Object.freeze({ record, score: -row.best, matches: row.matches }))
      }
      return { hits, more: rows.length > search.limit }
    }).then(async (page) => {
      const records = await withLiveRevisions(
        { sessions: this.#sessions, persistence: this.#persistence },
        page.hits.map((h) => h.record),
        signal,
      )
      return { ...page, hits: Object.freeze(page.hits.map((hit, i) => Object.freeze({ ...hit, record: records[i]! }))) }
    })
  }

  async #search<T>(
    request: SearchRequest,
    kind: 'sessions' | 'events',
    signal: AbortSignal | undefined,
    shape: (
      rows: readonly unknown[],
      search: ParsedSearchRequest,
      liveIds: ReadonlySet<string>,
      modules: SearchModules,
    ) => { hits: T[]; more: boolean },
  ): Promise<SearchPage<T>> {
    checkAborted(signal)
    const [rules, statements] = await Promise.all([sharedRules(), searchStatements()])
    const { SEARCH_CURSOR_TAG } = statements
    const search = rules.parseSearchRequest(request, kind, SEARCH_CURSOR_TAG)
    const statement = kind === 'events' ? statements.searchEventsStatement : statements.searchSessionsStatement
    for (let attempt = 0; ; attempt++) {
      await guarded(this.#beforeSearch(), signal)
      checkAborted(signal)
      if (this.#store === undefined) throw this.#closedError()
      try {
        const liveIds = this.#sessions.list().map((s) => s.id)
        // The generation is read in the search's own transaction: the cursor it stamps matches these hits.
        const [meta, found] = await this.#read(
          [statements.GENERATION, statement(statements.ftsMatch(search.words), liveIds, search.limit + 1, search.offset)],
          'search',
          signal,
        )
        const generation = statements.generationOf(meta!)
        rules.checkSearchGeneration(search, generation)
        const { hits, more } = shape(found!, search, new Set(liveIds), { rules, statements })
        const nextCursor = more
          ? rules.encodeSearchCursor(kind, SEARCH_CURSOR_TAG, search, generation, search.offset + search.limit)
          : undefined
        return Object.freeze({ hits: Object.freeze(hits), ...(nextCursor === undefined ? {} : { nextCursor }) })
      } catch (error) {
        // Search has no scan to fall back on: rebuild the damaged index once and ask again.
        if (attempt > 0 || !(error instanceof IndexDamageError || isDamage(error)) || signal?.aborted) throw this.#wrapIndexError(error)
        this.#indexFailed(error)
      }
    }
  }

  // ---------------------------------------------------------- index upkeep

  reconcile(signal?: AbortSignal): Promise<ReconcileReport> {
    return guarded(
      this.#exclusive(() => this.#reconcileOrRebuild(this.#until(signal))),
      signal,
    )
  }

  /**
   * Open no longer runs `quick_check`, so damage inside the file surfaces
   * here, from the statements that meet it: the index is rebuilt from
   * nothing and the reconciliation runs again (once).
   */
  async #reconcileOrRebuild(signal: AbortSignal): Promise<ReconcileReport> {
    try {
      return await this.#reconcile(signal)
    } catch (error) {
      if (!(error instanceof IndexDamageError || isDamage(error)) || this.#closed) throw error
      this.#logger.warn(`dsh: the session query index at ${this.path} is damaged; rebuilding it.`, error)
      this.#reopenEmpty('corrupt')
      return this.#reconcile(signal)
    }
  }

  rebuild(signal?: AbortSignal): Promise<ReconcileReport> {
    return guarded(
      this.#exclusive(async () => {
        this.#reopenEmpty('requested')
        return this.#reconcile(this.#until(signal))
      }),
      signal,
    )
  }

  checkIndex(signal?: AbortSignal): Promise<IndexCheck> {
    return guarded(
      this.#exclusive(async (): Promise<IndexCheck> => {
        const problem = quickCheck(this.#requireStore().db)
        if (problem === 'ok') return { ok: true }
        this.#logger.warn(`dsh: the session query index at ${this.path} fails quick_check (${problem}); rebuilding it.`)
        this.#reopenEmpty('corrupt')
        return { ok: false, problem, rebuilt: await this.#reconcile(this.#until(signal)) }
      }),
      signal,
    )
  }

  get metrics(): IndexReadMetrics {
    return { ...this.#reads, inFlight: this.#worker?.inFlight ?? 0 }
  }

  /**
   * Runs request-serving statements under the budget, in the worker or on
   * the main connection, in one read transaction. Budget exhaustion is
   * `SESSION_QUERY_BUDGET_EXCEEDED`.
   */
  async #read(statements: readonly ReadStatement[], what: 'listing' | 'search', signal: AbortSignal | undefined): Promise<unknown[][]> {
    let result: BudgetedResult
    if (this.#worker !== undefined) {
      result = await guarded(this.#worker.run(statements, this.#budget), signal)
    } else {
      const inline = this.#inline
      if (inline === undefined) throw this.#closedError()
      result = inline.run(statements, this.#budget)
    }
    this.#reads.requests++
    this.#reads.lastRowsStepped = result.stepped
    if ('exceeded' in result) {
      this.#reads.budgetExceeded++
      const rows = this.#budget.rows === undefined ? '' : ` or ${this.#budget.rows} rows`
      throw new SessionQueryError(
        'SESSION_QUERY_BUDGET_EXCEEDED',
        `The ${what} was stopped after ${result.stepped} candidate rows: it exceeded its budget of ${this.#budget.ms} ms${rows}. Narrow it (fewer or rarer words, a smaller page) or try again later.`,
        {
          details: {
            stepped: result.stepped,
            budgetMs: this.#budget.ms,
            ...(this.#budget.rows === undefined ? {} : { budgetRows: this.#budget.rows }),
          },
        },
      )
    }
    return result.rows
  }

  #useStore(store: IndexStore): void {
    this.#store = store
    this.#inline = this.#worker === undefined ? createBudgetedReader(store.db) : undefined
    // The worker's connection still reads the replaced file: start it over on the new one.
    this.#worker?.restart()
  }

  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    // Never waits for a running statement: pending reads fail with SESSION_QUERY_CLOSED.
    this.#worker?.close()
    for (const off of this.#unsubscribe.splice(0)) off()
    this.#lifetime.abort()
    await this.#tail.catch(() => {})
    // Leave the index as current as memory allows: the text of this process's sessions (cold and live)
    // is written from memory, so the next process verifies a suffix of each instead of reading its body.
    if (this.#store !== undefined) {
      try {
        this.#noticeCold()
        if (this.#cold.size > 0) await this.#refreshCold(undefined)
        this.#syncLive()
      } catch (error) {
        this.#logger.warn(
          `dsh: the session query index at ${this.path} could not record this process's sessions before closing; the next process reads them.`,
          error,
        )
      }
    }
    this.#closed = true
    this.#store?.close()
    this.#store = undefined
    this.#inline = undefined
  }

  /** Before a listing: catch up with staleness and with sessions that went cold here. */
  async #beforeQuery(): Promise<void> {
    this.#assertOpen()
    const stale = this.#options.maxStalenessMs !== undefined && Date.now() - this.#lastReconcile > this.#options.maxStalenessMs
    if (stale) await this.#exclusive(() => this.#reconcileOrRebuild(this.#lifetime.signal))
    this.#noticeCold()
    if (this.#cold.size > 0) await this.#exclusive(() => this.#refreshCold(this.#lifetime.signal))
  }

  /** Before a search: as a listing, plus verified bodies and the text of live sessions. */
  async #beforeSearch(): Promise<void> {
    await this.#beforeQuery()
    if (this.#rebuilding !== undefined) await this.#rebuilding
    await this.#exclusive(async () => {
      await this.#verifyBodies()
      this.#syncLive()
    })
  }

  #noticeCold(): void {
    const now = new Map<string, Session>()
    for (const session of this.#sessions.list()) now.set(session.id, session)
    for (const [id, session] of this.#lastLive) if (!now.has(id)) this.#cold.set(id, session)
    this.#lastLive = now
  }

  /**
   * Sessions that went cold in this process: their rows take the persisted
   * revision (one `stat` each, no body read), the header they had live and
   * their text from memory. A session that was never persisted leaves the
   * corpus. Their text is verified lazily against the log (a suffix read from
   * the last indexed event), before the next search or by the next
   * reconciliation, in this process or the next.
   */
  async #refreshCold(signal: AbortSignal | undefined): Promise<void> {
    const batch = [...this.#cold.values()]
    this.#cold.clear()
    const revisions = await Promise.all(
      batch.map((s) =>
        this.#persistence.stat(s.id as SessionId, signal).then(
          (r) => ({ r }),
          (error: unknown) => ({ error }),
        ),
      ),
    )
    const store = this.#requireStore()
    store.transaction(() => {
      batch.forEach((session, i) => {
        const result = revisions[i]!
        if ('error' in result) {
          this.#logger.warn(`dsh: could not stat session '${session.id}' for the query index; retrying at the next query.`, result.error)
          this.#cold.set(session.id, session)
          return
        }
        if (this.#sessions.get(session.id) !== undefined) return
        if (result.r === undefined) {
          store.delete(session.id)
          store.clearPending(session.id)
          return
        }
        const state = store.rowState(session.id)
        if (state?.revision !== result.r) store.writeHeader(session.header, session.inheritedEventCount, result.r)
        if (store.rowState(session.id)?.bodyRevision !== result.r) {
          // Its text from memory now (appending only what is new); verified against the log before any search sees it.
          store.writeBody(session.id, session.events, undefined)
          store.addPending(session.id)
        }
      })
    })
  }

  /** Reads the pending bodies of sessions not live here (gone cold, or left by an interrupted reconciliation). */
  async #verifyBodies(): Promise<void> {
    const ids = this.#requireStore()
      .pendingIds()
      .filter((id) => this.#sessions.get(id) === undefined)
    if (ids.length === 0) return
    await this.#readBodies(ids, this.#lifetime.signal, () => {})
  }

  /** Indexes the text of live sessions from memory (no log read), appending only what is new. */
  #syncLive(): void {
    const store = this.#requireStore()
    const stale = this.#sessions.list().filter((s) => {
      const row = store.indexedCount(s.id)
      return row === undefined || row.count !== s.seq || row.inherited !== s.inheritedEventCount || row.header !== JSON.stringify(s.header)
    })
    if (stale.length === 0) return
    store.transaction(() => {
      for (const session of stale) {
        store.writeHeader(session.header, session.inheritedEventCount, store.rowState(session.id) === undefined ? null : 'keep')
        store.writeBody(session.id, session.events, undefined)
      }
    })
  }

  /**
   * The incremental reconciliation. It asks the persistence change feed what
   * changed since the cursor stored in the index: when the feed answers, only
   * the ids it names are looked at (nothing changed: no log and no header is
   * read); when it cannot prove completeness (first run, a missing or damaged
   * feed), one `persistence.list()` (header frames only) is compared with the
   * indexed revisions and rows of sessions no longer persisted are removed.
   * Either way the ids to read are recorded as pending in the same
   * transaction that advances the cursor, then read: a session whose indexed
   * prefix still holds costs only its new batches (`inspectFrom`). Live
   * sessions are skipped (they are answered from memory) and stay pending.
   */
  async #reconcile(signal: AbortSignal): Promise<ReconcileReport> {
    this.#assertOpen()
    const rebuild = this.#rebuildReason
    const progress = (p: Omit<IndexProgress, 'rebuild'>): void => {
      try {
        this.#options.onProgress?.(rebuild === undefined ? p : { ...p, rebuild })
      } catch (error) {
        this.#logger.warn('dsh: a query index progress callback failed.', error)
      }
    }
    progress({ phase: 'scan', done: 0, total: 0 })
    const since = this.#requireStore().feedCursor()
    let feed: SessionChanges
    try {
      feed = await guarded(this.#persistence.changes(since, signal), signal)
    } catch (error) {
      throw fromPersistenceError(error, undefined, signal)
    }
    const liveIds = new Set<string>(this.#sessions.list().map((s) => s.id))
    let listed = 0
    let removed = 0
    if (feed.rescan) {
      // The cursor was taken before the listing: whatever changes meanwhile is in the feed after it.
      const records: PersistedSessionRecord[] = await listPersisted({ sessions: this.#sessions, persistence: this.#persistence }, signal)
      listed = records.length
      progress({ phase: 'scan', done: listed, total: listed })
      const store = this.#requireStore()
      const states = store.rowStates()
      store.transaction(() => {
        const listedIds = new Set<string>()
        for (const record of records) {
          const id = record.header.id
          listedIds.add(id)
          const state = states.get(id)
          if (state?.revision !== record.revision) store.writeHeader(record.header, record.inheritedEventCount, record.revision)
          if (state?.bodyRevision !== record.revision) store.addPending(id)
        }
        for (const id of states.keys()) {
          if (listedIds.has(id) || liveIds.has(id)) continue
          store.delete(id)
          store.clearPending(id)
          removed++
        }
        store.setFeedCursor(feed.cursor)
      })
    } else {
      progress({ phase: 'scan', done: feed.ids.length, total: feed.ids.length })
      const store = this.#requireStore()
      if (feed.ids.length > 0 || feed.cursor !== since) {
        store.transaction(() => {
          for (const id of feed.ids) store.addPending(id)
          store.setFeedCursor(feed.cursor)
        })
      }
    }
    const toRead = this.#requireStore()
      .pendingIds()
      .filter((id) => !liveIds.has(id))
    const result = await this.#readBodies(toRead, signal, progress)
    this.#lastReconcile = Date.now()
    this.#rebuildReason = undefined
    return {
      ...(rebuild === undefined ? {} : { rebuild }),
      source: feed.rescan ? 'rescan' : 'feed',
      listed,
      changed: feed.rescan ? 0 : feed.ids.length,
      read: toRead.length - result.skipped,
      readWhole: result.whole,
      removed: removed + result.removed,
      corrupt: result.corrupt,
      failed: result.failed,
    }
  }

  /**
   * Reads the pending `ids` (a few at a time) and writes their text in
   * batched transactions. A session whose indexed prefix still holds is read
   * from its last indexed event on (`inspectFrom`), and only the events after
   * it are indexed; a new, re-created or rewritten one is read whole.
   */
  async #readBodies(
    ids: readonly string[],
    signal: AbortSignal,
    progress: (p: Omit<IndexProgress, 'rebuild'>) => void,
  ): Promise<{ corrupt: number; failed: number; removed: number; whole: number; skipped: number }> {
    const total = ids.length
    let done = 0
    let corrupt = 0
    let failed = 0
    let removed = 0
    let whole = 0
    let next = 0
    let unchanged = 0
    let missing = 0
    let pending: Array<{ id: string; observation?: SessionSuffixObservation | 'unchanged'; error?: unknown }> = []
    progress({ phase: 'index', done, total })
    const flush = (): void => {
      if (pending.length === 0) return
      const batch = pending
      pending = []
      const store = this.#requireStore()
      store.transaction(() => {
        for (const item of batch) {
          const observation = item.observation
          if (observation === 'unchanged') {
            store.clearPending(item.id)
          } else if (observation !== undefined) {
            store.writeHeader(observation.header, observation.inheritedEventCount, observation.revision)
            if (store.writeBody(item.id, observation.events, observation.revision, observation.from)) store.clearPending(item.id)
            else {
              // Another process re-indexed this row between the read and now: the next pass reads it again.
              failed++
            }
          } else if (isDshError(item.error, 'SESSION_PERSISTENCE_NOT_FOUND')) {
            missing++
            if (store.rowState(item.id) !== undefined) removed++
            store.delete(item.id)
            store.clearPending(item.id)
          } else if (isDshError(item.error, 'SESSION_PERSISTENCE_CORRUPT')) {
            corrupt++
            const revision = store.rowState(item.id)?.revision
            if (revision != null) store.markCorrupt(item.id, revision)
            store.clearPending(item.id)
          } else {
            failed++
            this.#logger.warn(
              `dsh: could not read session '${item.id}' for the query index; the next reconciliation retries it.`,
              item.error,
            )
          }
        }
      })
      progress({ phase: 'index', done, total })
    }
    const read = async (id: string): Promise<SessionSuffixObservation | 'unchanged'> => {
      const sid = id as SessionId
      // A row whose text was read at its listed revision: one stat tells whether the log moved since
      // (the feed also names the changes this process made and already indexed).
      const state = this.#requireStore().rowState(id)
      if (state?.revision != null && state.bodyRevision === state.revision) {
        const revision = await this.#persistence.stat(sid, signal)
        if (revision === state.revision) {
          unchanged++
          return 'unchanged'
        }
      }
      const from = this.#requireStore().suffixStart(id)
      const suffix = await this.#persistence.inspectFrom(sid, SessionLogOffset(from), signal)
      if (this.#requireStore().continues(id, suffix.header, suffix.inheritedEventCount, suffix.events, suffix.from)) return suffix
      // The indexed prefix does not hold: the log was re-created or rewritten under this id.
      whole++
      return from === 0 ? suffix : this.#persistence.inspectFrom(sid, SessionLogOffset(0), signal)
    }
    const worker = async (): Promise<void> => {
      while (next < ids.length) {
        const id = ids[next++]!
        try {
          // Await first: `pending` may be swapped by a flush while this read is in flight.
          const observation = await read(id)
          pending.push({ id, observation })
        } catch (error) {
          if (signal.aborted || isDshError(error, 'CANCELLED')) throw fromPersistenceError(error, id, signal)
          pending.push({ id, error })
        }
        done++
        if (pending.length >= WRITE_BATCH) flush()
      }
    }
    const workers = Array.from({ length: Math.min(Math.max(1, this.#options.readConcurrency ?? 4), Math.max(1, ids.length)) }, worker)
    try {
      await Promise.all(workers)
    } finally {
      // Whatever was read before a cancellation is kept: the next run resumes from there.
      if (!this.#closed) flush()
    }
    return { corrupt, failed, removed, whole, skipped: unchanged + missing }
  }

  /** Aborts with the caller's signal and when this query closes. */
  #until(signal: AbortSignal | undefined): AbortSignal {
    return signal === undefined ? this.#lifetime.signal : AbortSignal.any([signal, this.#lifetime.signal])
  }

  /** Runs `fn` after every index writer before it. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(fn, fn)
    this.#tail = run.catch(() => {})
    return run
  }

  /** Damage found while serving: answer by scanning and rebuild the index in the background. */
  #indexFailed(error: unknown): void {
    if (!(error instanceof IndexDamageError || isDamage(error))) {
      this.#logger.warn('dsh: the session query index failed; this listing scans persistence instead.', error)
      return
    }
    if (this.#rebuilding !== undefined || this.#closed) return
    this.#logger.warn(`dsh: the session query index at ${this.path} is damaged; rebuilding it (listings scan meanwhile).`, error)
    const rebuilding = this.#exclusive(async () => {
      this.#reopenEmpty('corrupt')
      await this.#reconcile(this.#lifetime.signal)
    })
    this.#rebuilding = rebuilding
    rebuilding.then(
      () => (this.#rebuilding = undefined),
      (failure: unknown) => {
        this.#rebuilding = undefined
        if (!this.#closed)
          this.#logger.error('dsh: rebuilding the session query index failed; listings keep scanning until it succeeds.', failure)
      },
    )
  }

  #reopenEmpty(reason: RebuildReason): void {
    try {
      this.#store?.close()
    } catch {
      // A damaged handle may fail to close; the file is removed either way.
    }
    removeIndexFile(this.path)
    const opened = openIndexFile(this.path)
    this.#useStore(new IndexStore(opened.db))
    this.#rebuildReason = reason
  }

  #requireStore(): IndexStore {
    this.#assertOpen()
    if (this.#store === undefined) throw this.#closedError()
    return this.#store
  }

  #assertOpen(): void {
    if (this.#closed) throw this.#closedError()
  }

  #closedError(): Error {
    return new SessionQueryError('SESSION_QUERY_CLOSED', `The session query over the index at ${this.path} is closed; open a new one.`)
  }

  #wrapIndexError(error: unknown): unknown {
    if (isDshError(error)) return error
    const message = error instanceof Error ? error.message : String(error)
    return new SessionQueryError(
      'SESSION_QUERY_INDEX_FAILED',
      `The session query index at ${this.path} failed: ${message}. Delete the file to force a rebuild if this persists.`,
      { cause: error },
    )
  }
}
