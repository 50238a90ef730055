import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import { parseSessionHeader, type SessionHeader, type SessionId, SessionLogOffset } from '@dsh/session'
import type { SessionChangeCursor, SessionPersistence } from '@dsh/session-persistence'
import { type ChangeSubscription, keyOf, revisionOf, subscribeChanges, watchPool } from '@dsh/session-persistence-postgres/backend'
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
} from '@dsh/session-query/backend'
import {
  checkSearchGeneration,
  encodeSearchCursor,
  markedSnippet,
  observe,
  type ParsedSearchRequest,
  parseSearchRequest,
  readHistoryOf,
  readWindowOf,
  snippetMarkers,
} from '@dsh/session-query/backend/reads'
import type pg from 'pg'
import { PostgresSessionQueryError } from './errors.js'
import { eventText } from './event-text.js'
import { type ListingRow, listingStatement, recordOf } from './listing.js'
import { type Candidate, OVERLAY_LIMIT, OVERLAY_TEXT_LIMIT, Overlay, type OverlayEntry, overlayUnavailable, textRows } from './overlay.js'
import { SEARCH_SCHEMA } from './schema.js'

/** PostgreSQL's search cursors: another backend's cursors are refused. The words reach `plainto_tsquery` as a parameter, so nothing in them is syntax. */
const SEARCH_CURSOR_TAG = 'pg-search'

export interface PostgresSessionQueryOptions {
  /** The pool shared with `@dsh/session-persistence-postgres` (the same database). */
  readonly pool: pg.Pool
  readonly sessions: LiveSessions
  /** The PostgreSQL persistence over the same database (observations and the change feed). */
  readonly persistence: SessionPersistence
  /** Create or upgrade the search tables on open (default true). */
  readonly migrate?: boolean
  /** Concurrent body reads while indexing text (default 4). */
  readonly indexConcurrency?: number
  /**
   * Index new text as batches land: LISTEN on the change channel and catch up
   * in the background (default true). Searches catch up first either way, so
   * this only moves the work off the search's path.
   */
  readonly indexOnNotify?: boolean
  /**
   * Never write (read-only hosts, a role that may only SELECT): no migration,
   * no indexing. A search answers from the index and, for the sessions whose
   * text it lacks (the change feed names them), from their events read into
   * memory and searched beside it (the overlay). Default false.
   */
  readonly readOnly?: boolean
  /**
   * Read-only: past this many sessions whose text the index lacks, a search
   * answers `SESSION_QUERY_INDEX_UNAVAILABLE` instead of reading them all
   * (default 1,000).
   */
  readonly overlayLimit?: number
  /** Read-only: the same past this many characters (UTF-16 code units) of such text held in memory (default 16 Mi). */
  readonly overlayTextLimit?: number
  /** Where fail-soft indexing problems are reported (default: the console). */
  readonly logger?: Logger
}

/** What one catch-up of the text index did. */
export interface SearchIndexReport {
  /** Sessions whose new events were read and indexed. */
  readonly indexed: number
  /** Sessions skipped because their log could not be read (retried next time). */
  readonly failed: number
  /** Sessions left out because their log is damaged (read again when it changes). */
  readonly damaged: number
}

export interface PostgresSessionQuery extends SessionQuery {
  searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>>
  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>>
  /** Indexes the text of every batch that landed since the last catch-up (searches do it first). Read-only: refused with `POSTGRES_QUERY_READ_ONLY`. */
  catchUp(signal?: AbortSignal): Promise<SearchIndexReport>
  close(): Promise<void>
}

/**
 * Opens the PostgreSQL query backend (service `sessionQuery`). Listing reads
 * the authoritative `dsh_sessions` table through its indexes — there is no
 * derived index to reconcile — merged with the live sessions of this
 * process; observations go through persistence; search keeps a tsvector per
 * event (GIN), brought up to date from the change feed before each search.
 */
export async function createPostgresSessionQuery(options: PostgresSessionQueryOptions): Promise<PostgresSessionQuery> {
  if (options?.pool === undefined || options.sessions === undefined || options.persistence === undefined) {
    throw new PostgresSessionQueryError(
      'POSTGRES_QUERY_INVALID_OPTIONS',
      'createPostgresSessionQuery needs { pool, sessions, persistence } over one PostgreSQL database.',
    )
  }
  const concurrency = options.indexConcurrency ?? 4
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new PostgresSessionQueryError(
      'POSTGRES_QUERY_INVALID_OPTIONS',
      `indexConcurrency must be a positive integer, got ${String(concurrency)}.`,
    )
  }
  const overlayLimit = options.overlayLimit ?? OVERLAY_LIMIT
  const overlayTextLimit = options.overlayTextLimit ?? OVERLAY_TEXT_LIMIT
  for (const [name, value] of Object.entries({ overlayLimit, overlayTextLimit })) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new PostgresSessionQueryError('POSTGRES_QUERY_INVALID_OPTIONS', `${name} must be a non-negative integer, got ${String(value)}.`)
    }
  }
  const readOnly = options.readOnly === true
  watchPool(options.pool)
  // Without migrating, the search tables must be exactly at this version (a typed refusal otherwise).
  await SEARCH_SCHEMA.open(options.pool, options.migrate !== false && !readOnly)
  const query = new PgSessionQuery(options, concurrency, readOnly ? new Overlay(overlayLimit, overlayTextLimit) : undefined)
  if (!readOnly && options.indexOnNotify !== false) await query.follow()
  return query
}

/** A session row's header; undefined when the row is damaged (not JSON, not a header). */
function headerOf(row: ListingRow): SessionHeader | undefined {
  try {
    return parseSessionHeader(JSON.parse(row.header))
  } catch {
    return undefined
  }
}

class PgSessionQuery implements PostgresSessionQuery {
  readonly #pool: pg.Pool
  readonly #sessions: LiveSessions
  readonly #persistence: SessionPersistence
  readonly #concurrency: number
  readonly #logger: Logger
  #cursor: SessionChangeCursor | undefined
  #catchingUp: Promise<SearchIndexReport> | undefined
  #subscription: ChangeSubscription | undefined
  #nextCatchUp: Promise<SearchIndexReport> | undefined
  #closed = false
  /** Read-only: what the searches add to the index (undefined: this instance indexes). */
  readonly #overlay: Overlay | undefined

  constructor(options: PostgresSessionQueryOptions, concurrency: number, overlay: Overlay | undefined) {
    this.#overlay = overlay
    this.#pool = options.pool
    this.#sessions = options.sessions
    this.#persistence = options.persistence
    this.#concurrency = concurrency
    this.#logger = options.logger ?? consoleLogger
  }

  // ---------------------------------------------------------------- listing

  async listSessions(filter?: SessionListFilter, signal?: AbortSignal): Promise<SessionListPage> {
    this.#assertOpen()
    checkAborted(signal)
    const parsed = parseListFilter(filter)
    const live = this.#sessions.list()
    const statement = listingStatement(parsed, indexFetchLimit(parsed, live.length))
    const { rows } = await guarded(
      this.#sql<ListingRow>(statement.text, statement.values, 'listing sessions', 'SESSION_QUERY_PERSISTENCE_FAILED'),
      signal,
    )
    const persisted: SessionQueryRecord[] = []
    for (const row of rows) {
      const record = recordOf(row, parsed)
      if (record !== undefined) persisted.push(record)
    }
    return indexListPage({ sessions: this.#sessions, persistence: this.#persistence }, parsed, persisted, live, signal)
  }

  // ----------------------------------------------------------- observations

  observeSession(id: string, signal?: AbortSignal) {
    this.#assertOpen()
    return observe({ sessions: this.#sessions, persistence: this.#persistence }, id, signal)
  }

  async readHistory(id: string, request?: unknown, signal?: AbortSignal) {
    this.#assertOpen()
    return readHistoryOf({ sessions: this.#sessions, persistence: this.#persistence }, id, request, signal)
  }

  async readWindow(id: string, request: unknown, signal?: AbortSignal) {
    this.#assertOpen()
    return readWindowOf({ sessions: this.#sessions, persistence: this.#persistence }, id, request, signal)
  }

  // ----------------------------------------------------------------- search

  async searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>> {
    const { search, generation, overlay } = await this.#prepareSearch(request, 'events', signal)
    const { rows } = await guarded(
      this.#sql<{ id: Buffer; seq: number; type: string; snippet: string; score: number }>(
        `SELECT s.id, t.seq, t.type, ts_headline('simple', t.body, q, $${4 + overlay.length}) AS snippet, ts_rank(t.tsv, q) AS score
         FROM plainto_tsquery('simple', $1) q, ${textRows(overlay.length > 0)} t JOIN dsh_sessions s USING (id_key, sid)
         WHERE t.tsv @@ q
         ORDER BY score DESC, s.id, t.seq
         LIMIT $2 OFFSET $3`,
        [search.words.join(' '), search.limit + 1, search.offset, ...overlay, headlineOptions()],
        'searching events',
      ),
      signal,
    )
    const hits = rows.slice(0, search.limit).map((row) =>
      Object.freeze({
        id: row.id.toString('utf8') as SessionId,
        seq: row.seq,
        type: row.type,
        ...markedSnippet(row.snippet),
        score: row.score,
      }),
    )
    return this.#page(hits, rows.length > search.limit, 'events', search, generation)
  }

  async searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>> {
    const { search, generation, overlay } = await this.#prepareSearch(request, 'sessions', signal)
    const { rows } = await guarded(
      this.#sql<ListingRow & { score: number; matches: number }>(
        `SELECT s.sid, s.header, s.inherited, s.next_seq, max(ts_rank(t.tsv, q)) AS score, count(*)::integer AS matches
         FROM plainto_tsquery('simple', $1) q, ${textRows(overlay.length > 0)} t JOIN dsh_sessions s USING (id_key, sid)
         WHERE t.tsv @@ q
         GROUP BY s.id_key, s.sid
         ORDER BY score DESC, s.id
         LIMIT $2 OFFSET $3`,
        [search.words.join(' '), search.limit + 1, search.offset, ...overlay],
        'searching sessions',
      ),
      signal,
    )
    const hits: SessionSearchHit[] = []
    for (const row of rows.slice(0, search.limit)) {
      const header = headerOf(row)
      // A damaged header row is left out, as listing leaves it out.
      if (header === undefined) continue
      const session = this.#sessions.get(header.id)
      const revision = revisionOf(row.sid, row.next_seq)
      const record =
        session === undefined
          ? Object.freeze({ header, inheritedEventCount: SessionLogOffset(row.inherited), live: false, persisted: true, revision })
          : liveRecord(session, { revision })
      hits.push(Object.freeze({ record, score: row.score, matches: row.matches }))
    }
    return this.#page(hits, rows.length > search.limit, 'sessions', search, generation)
  }

  async #prepareSearch(
    request: SearchRequest,
    kind: 'sessions' | 'events',
    signal: AbortSignal | undefined,
  ): Promise<{ search: ParsedSearchRequest; generation: string; overlay: unknown[] }> {
    this.#assertOpen()
    checkAborted(signal)
    const search = parseSearchRequest(request, kind, SEARCH_CURSOR_TAG)
    let overlay: unknown[] = []
    if (this.#overlay === undefined) await guarded(this.catchUp(), signal)
    else {
      await guarded(this.#readOverlay(this.#overlay, signal), signal)
      if (this.#overlay.entries.size > 0) overlay = this.#overlay.parameters()
    }
    const { rows } = await guarded(
      this.#sql<{ g: string }>(
        `SELECT coalesce(greatest((SELECT xid FROM dsh_batches ORDER BY xid DESC LIMIT 1), (SELECT xid FROM dsh_changes ORDER BY xid DESC LIMIT 1))::text, '0') AS g`,
        [],
        'reading the index generation',
      ),
      signal,
    )
    const generation = rows[0]!.g
    checkSearchGeneration(search, generation)
    return { search, generation, overlay }
  }

  #page<T>(hits: T[], more: boolean, kind: 'sessions' | 'events', search: ParsedSearchRequest, generation: string): SearchPage<T> {
    const next = more ? encodeSearchCursor(kind, SEARCH_CURSOR_TAG, search, generation, search.offset + search.limit) : undefined
    return Object.freeze({ hits: Object.freeze(hits), ...(next === undefined ? {} : { nextCursor: next }) })
  }

  // --------------------------------------------------------------- indexing

  /**
   * One catch-up at a time per instance. A caller always gets a catch-up that
   * started after its call (so a search sees every batch acknowledged before
   * it); callers arriving during one share a single follow-up, which a
   * caller's abort leaves running for the others.
   */
  catchUp(signal?: AbortSignal): Promise<SearchIndexReport> {
    this.#assertOpen()
    if (this.#overlay !== undefined) {
      return Promise.reject(
        new PostgresSessionQueryError(
          'POSTGRES_QUERY_READ_ONLY',
          'This PostgreSQL query backend was opened read-only and never writes the search index; a host that writes sessions (dsh serve or dsh run on the store) indexes their text.',
        ),
      )
    }
    if (this.#catchingUp !== undefined) {
      // The follow-up is shared: it runs without any one caller's signal, and each caller stops waiting on its own.
      this.#nextCatchUp ??= this.#catchingUp
        .catch(() => undefined)
        .then(() => {
          this.#nextCatchUp = undefined
          return this.catchUp()
        })
      return guarded(this.#nextCatchUp, signal)
    }
    const current = this.#catchUp(signal).finally(() => {
      if (this.#catchingUp === current) this.#catchingUp = undefined
    })
    this.#catchingUp = current
    return current
  }

  async #catchUp(signal: AbortSignal | undefined): Promise<SearchIndexReport> {
    const since = this.#cursor ?? (await this.#storedCursor())
    const changes = await this.#persistence.changes(since, signal).catch((error: unknown) => {
      throw fromPersistenceError(error, undefined, signal)
    })
    const candidates = await this.#candidates(changes.rescan ? undefined : changes.ids.filter((id) => typeof id === 'string'))
    const counts = { indexed: 0, failed: 0, damaged: 0, gone: 0 }
    const queue = [...candidates]
    const worker = async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        checkAborted(signal)
        counts[await this.#index(next, signal)]++
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, queue.length) }, worker))
    // Only a complete pass moves the cursor; a failed session is found again next time.
    if (counts.failed === 0) {
      this.#cursor = changes.cursor
      if (changes.cursor !== since) await this.#storeCursor(changes.cursor)
    }
    return { indexed: counts.indexed, failed: counts.failed, damaged: counts.damaged }
  }

  /** The cursor the index is complete up to, as the last complete pass of any instance stored it (undefined: none yet). */
  async #storedCursor(): Promise<SessionChangeCursor | undefined> {
    const { rows } = await this.#sql<{ cursor: string }>('SELECT cursor FROM dsh_search_cursor', [], 'reading the search cursor')
    return rows[0]?.cursor as SessionChangeCursor | undefined
  }

  /** Fail-soft: the stored cursor only saves the next new instance work; without it that instance starts further back. */
  async #storeCursor(cursor: SessionChangeCursor): Promise<void> {
    try {
      await this.#sql(
        'INSERT INTO dsh_search_cursor (cursor) VALUES ($1) ON CONFLICT (one) DO UPDATE SET cursor = EXCLUDED.cursor',
        [cursor],
        'storing the search cursor',
      )
    } catch (error) {
      this.#logger.warn('dsh: storing where the search index is complete up to failed; a new instance starts further back.', error)
    }
  }

  /**
   * The sessions whose log goes past their indexed text: among `ids`, or all
   * of them (undefined: the change feed asked for a rescan); at most `limit`
   * of them when given (the overlay asks for one past its bound, enough to
   * refuse without reading every such row).
   */
  async #candidates(ids: readonly string[] | undefined, limit?: number): Promise<Candidate[]> {
    if (ids?.length === 0) return []
    const values: unknown[] = ids === undefined ? [] : [ids.map((id) => keyOf(id))]
    if (limit !== undefined) values.push(limit)
    const { rows } = await this.#sql<Candidate>(
      `SELECT s.id_key, s.sid, s.id, coalesce(p.indexed, 0) AS indexed, s.next_seq FROM dsh_sessions s LEFT JOIN dsh_search_progress p USING (id_key, sid)
       WHERE ${ids === undefined ? '' : 's.id_key = ANY($1::bytea[]) AND '}s.next_seq > coalesce(p.indexed, 0)${limit === undefined ? '' : ` LIMIT $${values.length}`}`,
      values,
      ids === undefined ? 'finding unindexed sessions' : 'finding changed sessions',
    )
    return rows
  }

  /**
   * The text rows of a session's events from its indexed position on, and
   * where they end (undefined: another lifecycle holds the id now; its own
   * row is found next time).
   */
  async #textOf(
    candidate: Candidate,
    signal: AbortSignal | undefined,
  ): Promise<(Omit<OverlayEntry, 'candidate'> & { upTo: number }) | undefined> {
    const id = candidate.id.toString('utf8') as SessionId
    const observation = await this.#persistence.inspectFrom(id, SessionLogOffset(candidate.indexed), signal)
    if (!observation.revision.startsWith(`pg${candidate.sid}.`)) return undefined
    const seqs: number[] = []
    const types: string[] = []
    const bodies: string[] = []
    let units = 0
    for (const event of observation.events) {
      const text = eventText(event)
      if (text === undefined) continue
      seqs.push(event.seq)
      types.push(event.type.replace(/\p{Cs}/gu, '\uFFFD'))
      bodies.push(text)
      units += text.length
    }
    return { seqs, types, bodies, units, upTo: observation.from + observation.events.length }
  }

  /** Indexes one session's events from its indexed position on; fail-soft. `gone`: deleted meanwhile, or another lifecycle holds the id (its own row is found next time). */
  async #index(candidate: Candidate, signal: AbortSignal | undefined): Promise<'indexed' | 'failed' | 'damaged' | 'gone'> {
    const id = candidate.id.toString('utf8') as SessionId
    try {
      const text = await this.#textOf(candidate, signal)
      if (text === undefined) return 'gone'
      const { seqs, types, bodies, upTo } = text
      await this.#sql(
        `WITH p AS (
           INSERT INTO dsh_search_progress (id_key, sid, indexed) VALUES ($6, $1, $2)
           ON CONFLICT (id_key, sid) DO UPDATE SET indexed = GREATEST(dsh_search_progress.indexed, EXCLUDED.indexed))
         INSERT INTO dsh_event_text (id_key, sid, seq, type, body, tsv)
         SELECT $6, $1, u.seq, u.type, u.body, to_tsvector('simple', u.body) FROM unnest($3::integer[], $4::text[], $5::text[]) AS u(seq, type, body)
         ON CONFLICT (id_key, sid, seq) DO NOTHING`,
        [candidate.sid, upTo, seqs, types, bodies, candidate.id_key],
        `indexing the text of session '${id}'`,
      )
      return 'indexed'
    } catch (error) {
      if (signal?.aborted) throw error
      // Deleted meanwhile: nothing to index.
      if (
        (error as { code?: string }).code === '23503' ||
        (error as { cause?: { code?: string } }).cause?.code === '23503' ||
        isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')
      )
        return 'gone'
      // A damaged log reads the same until it changes: the pass is complete without it, and the feed names it again when it changes.
      if (isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')) {
        this.#logger.warn(`dsh: the log of session '${id}' is damaged; search leaves its text out until it changes.`, error)
        return 'damaged'
      }
      this.#logger.warn(`dsh: indexing the text of session '${id}' failed; search leaves it out until the next catch-up.`, error)
      return 'failed'
    }
  }

  /**
   * Brings the overlay up to date (read-only; one pass at a time, each caller
   * gets a pass that started after its call). The sessions the change feed
   * names since the last pass, and those the overlay holds, are looked up
   * again: one whose row, indexed position and end are unchanged keeps its
   * rows, any other is read again from its indexed position, and one the
   * index has caught up with (or that is gone) leaves.
   */
  #readOverlay(overlay: Overlay, signal: AbortSignal | undefined): Promise<void> {
    const pass = overlay.tail.then(() => this.#overlayPass(overlay, signal))
    overlay.tail = pass.catch(() => {})
    return pass
  }

  async #overlayPass(overlay: Overlay, signal: AbortSignal | undefined): Promise<void> {
    checkAborted(signal)
    const changes = await this.#persistence.changes(overlay.cursor ?? (await this.#storedCursor()), signal).catch((error: unknown) => {
      throw fromPersistenceError(error, undefined, signal)
    })
    const named = changes.rescan ? undefined : new Set([...changes.ids.filter((id) => typeof id === 'string'), ...overlay.entries.keys()])
    const candidates = await this.#candidates(named === undefined ? undefined : [...named], overlay.limit + 1)
    if (candidates.length > overlay.limit) throw overlayUnavailable(`it lacks the text of more than the ${overlay.limit} sessions`)
    const next = new Map<string, OverlayEntry>()
    const queue: Candidate[] = []
    let units = 0
    for (const candidate of candidates) {
      const id = candidate.id.toString('utf8')
      const held = overlay.entries.get(id)
      const { sid, indexed, next_seq } = held?.candidate ?? {}
      if (held !== undefined && sid === candidate.sid && indexed === candidate.indexed && next_seq === candidate.next_seq) {
        next.set(id, held)
        units += held.units
      } else queue.push(candidate)
    }
    const worker = async () => {
      for (let candidate = queue.shift(); candidate !== undefined; candidate = queue.shift()) {
        checkAborted(signal)
        const entry = await this.#overlayEntry(candidate, signal)
        if (entry === undefined) continue
        next.set(candidate.id.toString('utf8'), entry)
        units += entry.units
        if (units > overlay.textLimit) throw overlayUnavailable(`the text it lacks is more than the ${overlay.textLimit} characters`)
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, queue.length) }, worker))
    overlay.entries = next
    overlay.cursor = changes.cursor
  }

  /**
   * A session's overlay rows (undefined: deleted meanwhile, or another
   * lifecycle holds the id, whose own row is found next time). A log that
   * cannot be read is reported once and held with no rows until it changes.
   */
  async #overlayEntry(candidate: Candidate, signal: AbortSignal | undefined): Promise<OverlayEntry | undefined> {
    const id = candidate.id.toString('utf8')
    try {
      const text = await this.#textOf(candidate, signal)
      if (text === undefined) return undefined
      const { upTo, ...rows } = text
      return { candidate: { ...candidate, next_seq: upTo }, ...rows }
    } catch (error) {
      if (signal?.aborted) throw error
      if (isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) return undefined
      this.#logger.warn(`dsh: reading the text of session '${id}' failed; search leaves it out until it changes.`, error)
      return { candidate, seqs: [], types: [], bodies: [], units: 0 }
    }
  }

  /** Catches up in the background whenever a batch lands anywhere (one catch-up at a time; a notice during one runs another after it). */
  async follow(): Promise<void> {
    this.#subscription = await subscribeChanges(this.#pool, () => this.#landed())
  }

  #landed(): void {
    if (this.#closed) return
    void this.catchUp().catch((error: unknown) => {
      if (!this.#closed) this.#logger.warn('dsh: indexing new search text in the background failed; the next search catches up.', error)
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#subscription?.close()
    await this.#catchingUp?.catch(() => {})
    await this.#nextCatchUp?.catch(() => {})
  }

  #assertOpen(): void {
    if (this.#closed) throw queryError('SESSION_QUERY_CLOSED', 'This PostgreSQL query backend is closed; open a new one.')
  }

  /**
   * Runs one statement. Listing reads the authoritative session table, so its
   * failures are `SESSION_QUERY_PERSISTENCE_FAILED`; the search tables are the
   * index (`SESSION_QUERY_INDEX_FAILED`). Either way retrying may succeed.
   */
  async #sql<R extends pg.QueryResultRow>(
    text: string,
    values: unknown[],
    what: string,
    code: 'SESSION_QUERY_PERSISTENCE_FAILED' | 'SESSION_QUERY_INDEX_FAILED' = 'SESSION_QUERY_INDEX_FAILED',
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(text, values)
    } catch (error) {
      throw queryError(code, `PostgreSQL: ${what} failed (${(error as Error).message}). Retrying may succeed.`, { cause: error })
    }
  }
}

/** `ts_headline`'s options: matches between this process's markers (`markedSnippet` makes them `[…]`). */
function headlineOptions(): string {
  const { open, close } = snippetMarkers()
  return `StartSel=${open}, StopSel=${close}, MaxWords=24, MinWords=6`
}
