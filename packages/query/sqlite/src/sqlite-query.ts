import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import type { Session } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type {
  EventSearchHit,
  LiveSessions,
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
  guarded,
  indexFetchLimit,
  indexListPage,
  liveRecord,
  parseListFilter,
  queryError,
  withLiveRevisions,
} from '@dsh/session-query/backend'
import type { ParsedSearchRequest } from '@dsh/session-query/backend/reads'
import { type IndexUpkeep, readBodies } from './body-reads.js'
import { type BudgetedResult, budgetExceeded, createBudgetedReader, DEFAULT_BUDGET, type StatementBudget } from './budget.js'
import { IndexDamageError, IndexStore } from './index-store.js'
import type { IndexCheck, IndexReadMetrics, ReconcileReport, SqliteSessionQuery, SqliteSessionQueryOptions } from './query-types.js'
import { listedRecords, listStatement, type ReadStatement } from './read-statements.js'
import type { WorkerReader } from './reader-worker.js'
import { reconcileIndex, refreshCold, syncLive } from './reconcile.js'
import { isDamage, openIndexFile, quickCheck, type RebuildReason, removeIndexFile } from './schema.js'

// What a listing never needs is loaded the first time something else does
// (the module loader keeps it): `dsh sessions` then loads only the listing
// path. The rules of reads and search requests; the in-memory scan a listing
// falls back on; the search statements; the reader worker (worker mode only).
const readRules = () => import('@dsh/session-query/backend/reads')
const scanBackend = () => import('@dsh/session-query')
const searchStatements = () => import('./search.js')
const readerWorker = () => import('./reader-worker.js')

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
  readonly #upkeep: IndexUpkeep

  constructor(options: SqliteSessionQueryOptions) {
    this.path = options.path
    this.#options = options
    this.#sessions = options.sessions
    this.#persistence = options.persistence
    this.#logger = options.logger ?? consoleLogger
    this.#budget = options.budget ?? DEFAULT_BUDGET
    this.#upkeep = {
      sessions: options.sessions,
      persistence: options.persistence,
      logger: this.#logger,
      readConcurrency: options.readConcurrency ?? 4,
      store: () => this.#requireStore(),
      closed: () => this.#closed,
    }
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
    const { observe } = await readRules()
    return observe({ sessions: this.#sessions, persistence: this.#persistence }, id, signal)
  }

  async readHistory(id: string, request?: unknown, signal?: AbortSignal) {
    const { readHistoryOf } = await readRules()
    return readHistoryOf((i, s) => this.observeSession(i, s), id, request, signal)
  }

  async readWindow(id: string, request: unknown, signal?: AbortSignal) {
    const { readWindowOf } = await readRules()
    return readWindowOf((i, s) => this.observeSession(i, s), id, request, signal)
  }

  #scanQuery(): Promise<SessionQuery> {
    this.#scan ??= scanBackend().then(({ createSessionQuery }) =>
      createSessionQuery({ sessions: this.#sessions, persistence: this.#persistence }),
    )
    return this.#scan
  }

  // ----------------------------------------------------------------- search

  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>> {
    return this.#search(request, 'events', signal, (rows, search, _liveIds, statements) => statements.eventHits(rows, search.limit))
  }

  async searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>> {
    const page = await this.#search(request, 'sessions', signal, (rows, search, liveIds, statements) =>
      statements.sessionHits(rows, search.limit, liveIds, (id) => {
        const session = this.#sessions.get(id)
        return session === undefined ? undefined : liveRecord(session, undefined)
      }),
    )
    const records = await withLiveRevisions(
      { sessions: this.#sessions, persistence: this.#persistence },
      page.hits.map((h) => h.record),
      signal,
    )
    return { ...page, hits: Object.freeze(page.hits.map((hit, i) => Object.freeze({ ...hit, record: records[i]! }))) }
  }

  async #search<T>(
    request: SearchRequest,
    kind: 'sessions' | 'events',
    signal: AbortSignal | undefined,
    shape: (
      rows: readonly unknown[],
      search: ParsedSearchRequest,
      liveIds: ReadonlySet<string>,
      statements: Awaited<ReturnType<typeof searchStatements>>,
    ) => { hits: T[]; more: boolean },
  ): Promise<SearchPage<T>> {
    checkAborted(signal)
    const [rules, statements] = await Promise.all([readRules(), searchStatements()])
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
        const { hits, more } = shape(found!, search, new Set(liveIds), statements)
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
   * An ordinary open does not run `quick_check` (a pass over every page), so
   * damage inside the file surfaces here, from the statements that meet it:
   * the index is rebuilt from nothing and the reconciliation runs again (once).
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
      throw budgetExceeded(what, result.stepped, this.#budget)
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
        syncLive(this.#upkeep)
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
      syncLive(this.#upkeep)
    })
  }

  #noticeCold(): void {
    const now = new Map<string, Session>()
    for (const session of this.#sessions.list()) now.set(session.id, session)
    for (const [id, session] of this.#lastLive) if (!now.has(id)) this.#cold.set(id, session)
    this.#lastLive = now
  }

  /** Sessions that left the store since the last look: their rows take the persisted revision (see `refreshCold`). */
  async #refreshCold(signal: AbortSignal | undefined): Promise<void> {
    const batch = [...this.#cold.values()]
    this.#cold.clear()
    for (const session of await refreshCold(this.#upkeep, batch, signal)) this.#cold.set(session.id, session)
  }

  /** Reads the pending bodies of sessions not live here (gone cold, or left by an interrupted reconciliation). */
  async #verifyBodies(): Promise<void> {
    const ids = this.#requireStore()
      .pendingIds()
      .filter((id) => this.#sessions.get(id) === undefined)
    if (ids.length === 0) return
    await readBodies(this.#upkeep, ids, this.#lifetime.signal, () => {})
  }

  /** One reconciliation (see `reconcileIndex`), reporting why the index was rebuilt if it was. */
  async #reconcile(signal: AbortSignal): Promise<ReconcileReport> {
    this.#assertOpen()
    const report = await reconcileIndex(this.#upkeep, this.#rebuildReason, this.#options.onProgress, signal)
    this.#lastReconcile = Date.now()
    this.#rebuildReason = undefined
    return report
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
    return queryError('SESSION_QUERY_CLOSED', `The session query over the index at ${this.path} is closed; open a new one.`)
  }

  #wrapIndexError(error: unknown): unknown {
    if (isDshError(error)) return error
    const message = error instanceof Error ? error.message : String(error)
    return queryError(
      'SESSION_QUERY_INDEX_FAILED',
      `The session query index at ${this.path} failed: ${message}. Delete the file to force a rebuild if this persists.`,
      { cause: error },
    )
  }
}
