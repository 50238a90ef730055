import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import type { SessionId } from '@dsh/session'
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
  fromPersistenceError,
  guarded,
  indexFetchLimit,
  indexListPage,
  liveRecord,
  parseListFilter,
  queryError,
  withLiveRevisions,
} from '@dsh/session-query/backend'
import type { ParsedSearchRequest } from '@dsh/session-query/backend/reads'
import { type BudgetedResult, budgetExceeded, DEFAULT_BUDGET, type StatementBudget } from './budget.js'
import { type Connection, IndexHandle } from './connection.js'
import { identify } from './index-file.js'
import { IndexDamageError } from './index-store.js'
import { IndexWriter } from './index-writer.js'
import { behindIndex, currentRecords } from './overlay.js'
import type { IndexCheck, IndexReadMetrics, ReconcileReport, SqliteSessionQuery, SqliteSessionQueryOptions } from './query-types.js'
import { listedRecords, listStatement, type ReadStatement } from './read-statements.js'
import type { WorkerReader } from './reader-worker.js'
import { isDamage, openFailure, openReader, quickCheck, stateOf } from './schema.js'
import type { HeldSession } from './search-overlay.js'

// What a listing never needs is loaded the first time something else does
// (the module loader keeps it): `dsh sessions` then loads only the listing
// path. The rules of reads and search requests; the in-memory scan a listing
// falls back on; the search statements and overlay; the reader worker.
const readRules = () => import('@dsh/session-query/backend/reads')
const scanBackend = () => import('@dsh/session-query')
const searchStatements = () => import('./search.js')
const searchOverlay = () => import('./search-overlay.js')
const readerWorker = () => import('./reader-worker.js')

/** Default of `overlayLimit`: past this many changes a listing reads every header instead, and a search is refused. */
const OVERLAY_LIMIT = 1_000

/**
 * Opens the derived index at `options.path`: read-only (`readOnly`), or as
 * its writer, which builds it when missing, damaged or of another schema
 * (into a new file, swapped in with one rename) and, unless disabled,
 * catches it up with persistence before resolving.
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
  readonly #writer: boolean
  readonly #sessions: LiveSessions
  readonly #persistence: SessionPersistence
  readonly #options: SqliteSessionQueryOptions
  readonly #logger: Logger
  readonly #budget: StatementBudget
  readonly #overlayLimit: number
  readonly #concurrency: number
  /** The in-memory scan a listing falls back on when the index cannot answer; made on first use. */
  #scan: Promise<SessionQuery> | undefined
  readonly #handle: IndexHandle
  /** Builds and updates the index (a reader uses it only for an explicit rebuild). */
  readonly #upkeep: IndexWriter
  #warned: string | undefined
  /** A rebuild started by a query that met damage is queued or running. */
  #rebuilding = false
  readonly #unsubscribe: Array<() => void> = []
  readonly #lifetime = new AbortController()
  #closed = false
  #closing: Promise<void> | undefined
  /** Set in worker mode: request-serving reads without an overlay go to the worker thread. */
  #worker: WorkerReader | undefined
  readonly #reads = { requests: 0, lastRowsStepped: 0, budgetExceeded: 0 }

  constructor(options: SqliteSessionQueryOptions) {
    this.path = options.path
    this.#writer = options.readOnly !== true
    this.#options = options
    this.#sessions = options.sessions
    this.#persistence = options.persistence
    this.#logger = options.logger ?? consoleLogger
    this.#budget = options.budget ?? DEFAULT_BUDGET
    this.#overlayLimit = options.overlayLimit ?? OVERLAY_LIMIT
    this.#concurrency = Math.max(1, options.readConcurrency ?? 4)
    const warn = (message: string, error: unknown): void => this.#warnOnce(message, error)
    this.#handle = new IndexHandle({
      path: options.path,
      writer: this.#writer,
      onFile: (file) => this.#worker?.restart(file),
      onRebuildable: () => this.#writer && this.#upkeep.rebuildLater(),
      warn,
    })
    this.#upkeep = new IndexWriter({
      handle: this.#handle,
      query: options,
      logger: this.#logger,
      concurrency: this.#concurrency,
      lifetime: this.#lifetime.signal,
      closed: () => this.#closed,
      warn,
    })
    if (!this.#writer) this.#upkeep.stop()
    else if (options.context !== undefined) {
      const { context } = options
      this.#unsubscribe.push(
        context.on('session/event', () => this.#upkeep.schedule()),
        context.on('session/disposed', (session) => {
          this.#upkeep.cold.hold(session)
          this.#upkeep.schedule()
        }),
      )
    }
  }

  async open(signal: AbortSignal | undefined): Promise<void> {
    if (this.#options.worker === true) {
      const { WorkerReader } = await readerWorker()
      this.#worker = new WorkerReader(this.path, () => this.#closedError())
    }
    if (this.#writer && this.#options.reconcileOnOpen !== false) {
      try {
        if (this.#options.check === true) await this.checkIndex(signal)
        await this.reconcile(signal)
      } catch (error) {
        // An index that cannot be written leaves this host working: queries read it (or the logs) meanwhile.
        if (!isDshError(error, 'SESSION_QUERY_INDEX_UNAVAILABLE')) throw error
      }
    } else this.#handle.holdSync(() => this.#current())
  }

  // ---------------------------------------------------------------- listing

  async listSessions(filter?: SessionListFilter, signal?: AbortSignal): Promise<SessionListPage> {
    checkAborted(signal)
    const parsed = parseListFilter(filter)
    await guarded(this.#beforeQuery(), signal)
    checkAborted(signal)
    return this.#handle.hold(async () => {
      const conn = this.#current()
      if (conn === undefined) return await this.#scanList(filter, signal)
      const live = this.#sessions.list()
      let persisted: SessionQueryRecord[]
      try {
        const behind = await behindIndex(conn.store, this.#persistence, new Set(live.map((s) => s.id)), signal)
        if (behind === undefined || behind.ids.length > this.#overlayLimit) return await this.#scanList(filter, signal)
        const known = (id: string) => this.#upkeep.cold.get(id)
        const current = await currentRecords(conn.store, this.#persistence, behind.ids, known, this.#concurrency, this.#logger, signal)
        const [rows] = await this.#read(conn, [listStatement(parsed, indexFetchLimit(parsed, live.length), behind.ids)], 'listing', signal)
        persisted = listedRecords(rows!)
        for (const record of current.values()) if (record !== undefined) persisted.push(record)
      } catch (error) {
        // Budget, cancellation, persistence and closing are answers; a failing index falls back to the logs.
        if (isDshError(error)) throw error
        this.#indexFailed(error)
        return await this.#scanList(filter, signal)
      }
      return await indexListPage({ sessions: this.#sessions, persistence: this.#persistence }, parsed, persisted, live, signal)
    })
  }

  async #scanList(filter: SessionListFilter | undefined, signal: AbortSignal | undefined): Promise<SessionListPage> {
    this.#scan ??= scanBackend().then(({ createSessionQuery }) =>
      createSessionQuery({ sessions: this.#sessions, persistence: this.#persistence }),
    )
    return (await this.#scan).listSessions(filter, signal)
  }

  // ------------------------------------------------------------ observations

  async observeSession(id: string, signal?: AbortSignal) {
    const { observe } = await readRules()
    return observe({ sessions: this.#sessions, persistence: this.#persistence }, id, signal)
  }

  async readHistory(id: string, request?: unknown, signal?: AbortSignal) {
    const { readHistoryOf } = await readRules()
    return readHistoryOf({ sessions: this.#sessions, persistence: this.#persistence }, id, request, signal)
  }

  async readWindow(id: string, request: unknown, signal?: AbortSignal) {
    const { readWindowOf } = await readRules()
    return readWindowOf({ sessions: this.#sessions, persistence: this.#persistence }, id, request, signal)
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
    for (let attempt = 0; ; attempt++) {
      await guarded(this.#beforeQuery(), signal)
      checkAborted(signal)
      const answer = await this.#handle.hold(async (): Promise<SearchPage<T> | 'again'> => {
        try {
          const conn = this.#current()
          if (conn === undefined) throw this.#handle.unavailable()
          const liveIds = this.#sessions.list().map((s) => s.id)
          const behind = await behindIndex(conn.store, this.#persistence, new Set(liveIds), signal)
          if (behind === undefined) throw this.#handle.unavailable('it does not follow the change feed yet, or the feed was reset')
          if (behind.ids.length > this.#overlayLimit) throw this.#handle.unavailable(`it is ${behind.ids.length} changes behind the logs`)
          const match = statements.ftsMatch(search.words)
          const overlay = behind.ids.length > 0 || this.#sessions.list().length > 0 ? await searchOverlay() : undefined
          const ahead = overlay?.liveAhead(conn.store, this.#sessions.list()) ?? []
          let found: unknown[]
          let generation: string
          if (overlay === undefined || (behind.ids.length === 0 && ahead.length === 0)) {
            const statement = kind === 'events' ? statements.searchEventsStatement : statements.searchSessionsStatement
            // The generation is read in the search's own transaction: the cursor it stamps matches these hits.
            const [meta, rows] = await this.#read(
              conn,
              [statements.GENERATION, statement(match, liveIds, search.limit + 1, search.offset)],
              'search',
              signal,
            )
            found = rows!
            generation = statements.generationOf(meta!)
          } else {
            // Sessions this process holds come from memory: live ones as they are, cold ones at their persisted revision.
            const held: HeldSession[] = ahead.map((session) => ({ session, revision: null }))
            const fromLogs: string[] = []
            for (const id of behind.ids) {
              const session = this.#upkeep.cold.get(id)
              const revision = session === undefined ? undefined : await this.#stat(id, signal)
              if (session !== undefined && revision !== undefined) held.push({ session, revision })
              else fromLogs.push(id)
            }
            const tag = await overlay.loadSearchOverlay(conn.db, conn.store, this.#persistence, fromLogs, held, this.#concurrency, signal)
            const statement = kind === 'events' ? overlay.overlayEventsStatement : overlay.overlaySessionsStatement
            // Over the overlay's TEMP tables: on this connection, not the worker's.
            const [meta, rows] = this.#counted(
              conn.run([statements.GENERATION, statement(match, liveIds, search.limit + 1, search.offset)], this.#budget),
              'search',
            )
            found = rows!
            generation = `${statements.generationOf(meta!)}~${tag}`
          }
          rules.checkSearchGeneration(search, generation)
          const { hits, more } = shape(found, search, new Set(liveIds), statements)
          const nextCursor = more
            ? rules.encodeSearchCursor(kind, SEARCH_CURSOR_TAG, search, generation, search.offset + search.limit)
            : undefined
          return Object.freeze({ hits: Object.freeze(hits), ...(nextCursor === undefined ? {} : { nextCursor }) })
        } catch (error) {
          if (isDshError(error)) throw error
          const damaged = error instanceof IndexDamageError || isDamage(error)
          // A writer rebuilds a damaged index once and asks again; a reader has nothing else to search.
          if (damaged && this.#writer && attempt === 0 && !signal?.aborted) return 'again'
          throw this.#handle.unavailable(`${stateOf(error)}: ${error instanceof Error ? error.message : String(error)}`, error)
        }
      })
      if (answer !== 'again') return answer
      await guarded(
        this.#upkeep.exclusive(() => this.#upkeep.build('corrupt', this.#lifetime.signal)),
        signal,
      )
    }
  }

  async #stat(id: string, signal: AbortSignal | undefined): Promise<string | undefined> {
    try {
      return await guarded(this.#persistence.stat(id as SessionId, signal), signal)
    } catch (error) {
      throw fromPersistenceError(error, id, signal)
    }
  }

  // ---------------------------------------------------------- index upkeep

  /**
   * A writer brings the index up to date (see `IndexWriter.catchUp`) and
   * resolves what it did. A reader writes nothing: it resolves how many
   * sessions the index is behind on (`changed`), which its queries take
   * from the logs.
   */
  reconcile(signal?: AbortSignal): Promise<ReconcileReport> {
    this.#assertOpen()
    if (!this.#writer) return guarded(this.#behindReport(signal), signal)
    return guarded(
      this.#upkeep.exclusive(() => this.#upkeep.catchUp(this.#until(signal))),
      signal,
    )
  }

  /** Builds the index from nothing into a new file and swaps it in (see `buildIndex`). */
  rebuild(signal?: AbortSignal): Promise<ReconcileReport> {
    this.#assertOpen()
    return guarded(
      this.#upkeep.exclusive(() => this.#upkeep.build('requested', this.#until(signal))),
      signal,
    )
  }

  checkIndex(signal?: AbortSignal): Promise<IndexCheck> {
    this.#assertOpen()
    return guarded(
      this.#upkeep.exclusive(async (): Promise<IndexCheck> => {
        const located = identify(this.path)
        if (located === undefined) {
          if (!this.#writer) return { ok: false, problem: 'missing' }
          return { ok: false, problem: 'missing', rebuilt: await this.#upkeep.build('missing', this.#until(signal)) }
        }
        let problem: string
        try {
          const db = openReader(located.file)
          try {
            problem = quickCheck(db)
          } finally {
            db.close()
          }
        } catch (error) {
          const failure = openFailure(error, located.file, 'Checking')
          if (failure.state !== 'corrupt' && failure.state !== 'schema') throw this.#handle.unavailable(failure.message, failure)
          problem = failure.message
        }
        if (problem === 'ok') return { ok: true }
        if (!this.#writer) return { ok: false, problem }
        this.#logger.warn(`dsh: the session query index at ${this.path} fails quick_check (${problem}); rebuilding it.`)
        return { ok: false, problem, rebuilt: await this.#upkeep.build('corrupt', this.#until(signal)) }
      }),
      signal,
    )
  }

  get metrics(): IndexReadMetrics {
    const { cold } = this.#upkeep
    return {
      ...this.#reads,
      inFlight: this.#worker?.inFlight ?? 0,
      coldSessions: cold.size,
      coldEvents: cold.events,
      coldDropped: cold.dropped,
    }
  }

  /**
   * Runs request-serving statements under the budget, in the worker or on
   * the connection, in one read transaction. Budget exhaustion is
   * `SESSION_QUERY_BUDGET_EXCEEDED`.
   */
  async #read(conn: Connection, statements: readonly ReadStatement[], what: 'listing' | 'search', signal: AbortSignal | undefined) {
    const result =
      this.#worker === undefined ? conn.run(statements, this.#budget) : await guarded(this.#worker.run(statements, this.#budget), signal)
    return this.#counted(result, what)
  }

  #counted(result: BudgetedResult, what: 'listing' | 'search'): unknown[][] {
    this.#reads.requests++
    this.#reads.lastRowsStepped = result.stepped
    if ('exceeded' in result) {
      this.#reads.budgetExceeded++
      throw budgetExceeded(what, result.stepped, this.#budget)
    }
    return result.rows
  }

  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    // Never waits for a running statement: pending reads fail with SESSION_QUERY_CLOSED.
    this.#worker?.close()
    for (const off of this.#unsubscribe.splice(0)) off()
    this.#upkeep.stop()
    this.#lifetime.abort()
    await this.#upkeep.settled()
    // A writer leaves the index as current as this process knows it: the next process reads only what
    // changed after. One that never held it for writing (a failed open, a full disk) builds nothing on its way out.
    if (this.#writer && this.#handle.connection?.writable === true) {
      try {
        await this.#upkeep.catchUp(undefined, true)
      } catch (error) {
        this.#warnOnce(
          `dsh: the session query index at ${this.path} could not record this process's last changes; the next process reads them from the logs.`,
          error,
        )
      }
    }
    this.#closed = true
    this.#handle.close()
  }

  /** The connection of this operation (see `IndexHandle.current`); throws once the query is closed. */
  #current(): Connection | undefined {
    this.#assertOpen()
    return this.#handle.current()
  }

  /** What a reader's `reconcile()` reports: how far behind the index is; nothing is written. */
  async #behindReport(signal: AbortSignal | undefined): Promise<ReconcileReport> {
    const behind = await this.#handle.hold(async () => {
      const conn = this.#current()
      return conn === undefined ? undefined : await behindIndex(conn.store, this.#persistence, new Set(), signal)
    })
    return {
      source: behind === undefined ? 'rescan' : 'feed',
      listed: 0,
      changed: behind?.ids.length ?? 0,
      fromMemory: 0,
      read: 0,
      readWhole: 0,
      removed: 0,
      corrupt: 0,
      failed: 0,
    }
  }

  /** Before a query: a writer catches up when its last pass is older than `maxStalenessMs`, and notices sessions gone cold. */
  async #beforeQuery(): Promise<void> {
    this.#assertOpen()
    if (!this.#writer) return
    this.#upkeep.noticeCold()
    const stale = this.#options.maxStalenessMs !== undefined && Date.now() - this.#upkeep.lastPass > this.#options.maxStalenessMs
    if (!stale) return
    try {
      await this.#upkeep.exclusive(() => this.#upkeep.catchUp(this.#lifetime.signal))
    } catch (error) {
      // An index that cannot be written now is not a failed query: the query reads it (and the logs) instead.
      if (!isDshError(error, 'SESSION_QUERY_INDEX_UNAVAILABLE')) throw error
      this.#warnOnce(`dsh: ${(error as Error).message}`, undefined)
    }
  }

  /** Aborts with the caller's signal and when this query closes. */
  #until(signal: AbortSignal | undefined): AbortSignal {
    return signal === undefined ? this.#lifetime.signal : AbortSignal.any([signal, this.#lifetime.signal])
  }

  /** The index failed under a query: damage makes a writer rebuild it (in the background); the query reads the logs. */
  #indexFailed(error: unknown): void {
    const damaged = error instanceof IndexDamageError || isDamage(error)
    this.#warnOnce(
      `dsh: the session query index at ${this.path} failed (${damaged ? 'corrupt' : stateOf(error)}); this query reads the logs instead${damaged && this.#writer ? ' while it is rebuilt' : ''}.`,
      error,
    )
    // Queries that meet the same damage while its rebuild is on its way read the logs; they do not queue another.
    if (!damaged || !this.#writer || this.#closed || this.#rebuilding) return
    this.#rebuilding = true
    this.#upkeep
      .exclusive(() => this.#upkeep.build('corrupt', this.#lifetime.signal))
      .catch((failure: unknown) => {
        if (!this.#closed)
          this.#logger.error('dsh: rebuilding the session query index failed; queries read the logs until it succeeds.', failure)
      })
      .finally(() => {
        this.#rebuilding = false
      })
  }

  #warnOnce(message: string, error: unknown): void {
    if (this.#warned === message) return
    this.#warned = message
    this.#logger.warn(message, error)
  }

  #assertOpen(): void {
    if (this.#closed) throw this.#closedError()
  }

  #closedError(): Error {
    return queryError('SESSION_QUERY_CLOSED', `The session query over the index at ${this.path} is closed; open a new one.`)
  }
}
