import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import { parseSessionHeader, type SessionId, SessionLogOffset } from '@dsh/session'
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
  observe,
  type ParsedSearchRequest,
  parseSearchRequest,
  readHistoryOf,
  readWindowOf,
} from '@dsh/session-query/backend/reads'
import type pg from 'pg'
import { PostgresSessionQueryError } from './errors.js'
import { eventText } from './event-text.js'
import { type ListingRow, listingStatement, recordOf } from './listing.js'
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
  /** Where fail-soft indexing problems are reported (default: the console). */
  readonly logger?: Logger
}

/** What one catch-up of the text index did. */
export interface SearchIndexReport {
  /** Sessions whose new events were read and indexed. */
  readonly indexed: number
  /** Sessions skipped because their log could not be read (retried next time). */
  readonly failed: number
}

export interface PostgresSessionQuery extends SessionQuery {
  searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>>
  searchEvents(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>>
  /** Indexes the text of every batch that landed since the last catch-up (searches do it first). */
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
  watchPool(options.pool)
  // Without migrating, the search tables must be exactly at this version (a typed refusal otherwise).
  await SEARCH_SCHEMA.open(options.pool, options.migrate !== false)
  const query = new PgSessionQuery(options, concurrency)
  if (options.indexOnNotify !== false) await query.follow()
  return query
}

interface Candidate {
  id_key: Buffer
  sid: string
  id: Buffer
  indexed: number
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

  constructor(options: PostgresSessionQueryOptions, concurrency: number) {
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
    const { search, generation } = await this.#prepareSearch(request, 'events', signal)
    const { rows } = await guarded(
      this.#sql<{ id: Buffer; seq: number; type: string; snippet: string; score: number }>(
        `SELECT s.id, t.seq, t.type, ts_headline('simple', t.body, q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=6') AS snippet, ts_rank(t.tsv, q) AS score
         FROM plainto_tsquery('simple', $1) q, dsh_event_text t JOIN dsh_sessions s USING (id_key, sid)
         WHERE t.tsv @@ q
         ORDER BY score DESC, s.id, t.seq
         LIMIT $2 OFFSET $3`,
        [search.words.join(' '), search.limit + 1, search.offset],
        'searching events',
      ),
      signal,
    )
    const hits = rows
      .slice(0, search.limit)
      .map((row) =>
        Object.freeze({ id: row.id.toString('utf8') as SessionId, seq: row.seq, type: row.type, snippet: row.snippet, score: row.score }),
      )
    return this.#page(hits, rows.length > search.limit, 'events', search, generation)
  }

  async searchSessions(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>> {
    const { search, generation } = await this.#prepareSearch(request, 'sessions', signal)
    const { rows } = await guarded(
      this.#sql<ListingRow & { score: number; matches: number }>(
        `SELECT s.sid, s.header, s.inherited, s.next_seq, max(ts_rank(t.tsv, q)) AS score, count(*)::integer AS matches
         FROM plainto_tsquery('simple', $1) q, dsh_event_text t JOIN dsh_sessions s USING (id_key, sid)
         WHERE t.tsv @@ q
         GROUP BY s.id_key, s.sid
         ORDER BY score DESC, s.id
         LIMIT $2 OFFSET $3`,
        [search.words.join(' '), search.limit + 1, search.offset],
        'searching sessions',
      ),
      signal,
    )
    const hits = rows.slice(0, search.limit).map((row) => {
      const header = parseSessionHeader(JSON.parse(row.header))
      const session = this.#sessions.get(header.id)
      const revision = revisionOf(row.sid, row.next_seq)
      const record =
        session === undefined
          ? Object.freeze({ header, inheritedEventCount: SessionLogOffset(row.inherited), live: false, persisted: true, revision })
          : liveRecord(session, { revision })
      return Object.freeze({ record, score: row.score, matches: row.matches })
    })
    return this.#page(hits, rows.length > search.limit, 'sessions', search, generation)
  }

  async #prepareSearch(
    request: SearchRequest,
    kind: 'sessions' | 'events',
    signal: AbortSignal | undefined,
  ): Promise<{ search: ParsedSearchRequest; generation: string }> {
    this.#assertOpen()
    checkAborted(signal)
    const search = parseSearchRequest(request, kind, SEARCH_CURSOR_TAG)
    await guarded(this.catchUp(), signal)
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
    return { search, generation }
  }

  #page<T>(hits: T[], more: boolean, kind: 'sessions' | 'events', search: ParsedSearchRequest, generation: string): SearchPage<T> {
    const next = more ? encodeSearchCursor(kind, SEARCH_CURSOR_TAG, search, generation, search.offset + search.limit) : undefined
    return Object.freeze({ hits: Object.freeze(hits), ...(next === undefined ? {} : { nextCursor: next }) })
  }

  // --------------------------------------------------------------- indexing

  /**
   * One catch-up at a time per instance. A caller always gets a catch-up that
   * started after its call (so a search sees every batch acknowledged before
   * it); callers arriving during one share a single follow-up.
   */
  catchUp(signal?: AbortSignal): Promise<SearchIndexReport> {
    this.#assertOpen()
    if (this.#catchingUp !== undefined) {
      this.#nextCatchUp ??= this.#catchingUp
        .catch(() => undefined)
        .then(() => {
          this.#nextCatchUp = undefined
          return this.catchUp(signal)
        })
      return this.#nextCatchUp
    }
    const current = this.#catchUp(signal).finally(() => {
      if (this.#catchingUp === current) this.#catchingUp = undefined
    })
    this.#catchingUp = current
    return current
  }

  async #catchUp(signal: AbortSignal | undefined): Promise<SearchIndexReport> {
    const changes = await this.#persistence.changes(this.#cursor, signal).catch((error: unknown) => {
      throw fromPersistenceError(error, undefined, signal)
    })
    let candidates: Candidate[]
    if (changes.rescan) {
      ;({ rows: candidates } = await this.#sql<Candidate>(
        `SELECT s.id_key, s.sid, s.id, coalesce(p.indexed, 0) AS indexed FROM dsh_sessions s LEFT JOIN dsh_search_progress p USING (id_key, sid)
         WHERE s.next_seq > coalesce(p.indexed, 0)`,
        [],
        'finding unindexed sessions',
      ))
    } else if (changes.ids.length === 0) {
      candidates = []
    } else {
      const keys = changes.ids.filter((id) => typeof id === 'string').map((id) => keyOf(id))
      ;({ rows: candidates } = await this.#sql<Candidate>(
        `SELECT s.id_key, s.sid, s.id, coalesce(p.indexed, 0) AS indexed FROM dsh_sessions s LEFT JOIN dsh_search_progress p USING (id_key, sid)
         WHERE s.id_key = ANY($1::bytea[]) AND s.next_seq > coalesce(p.indexed, 0)`,
        [keys],
        'finding changed sessions',
      ))
    }
    let indexed = 0
    let failed = 0
    const queue = [...candidates]
    const worker = async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        checkAborted(signal)
        if (await this.#index(next, signal)) indexed++
        else failed++
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, queue.length) }, worker))
    // Only a complete pass moves the cursor; a failed session is found again next time.
    if (failed === 0) this.#cursor = changes.cursor
    return { indexed, failed }
  }

  /** Indexes one session's events from its indexed position on; fail-soft. */
  async #index(candidate: Candidate, signal: AbortSignal | undefined): Promise<boolean> {
    const id = candidate.id.toString('utf8') as SessionId
    try {
      const observation = await this.#persistence.inspectFrom(id, SessionLogOffset(candidate.indexed), signal)
      // Another lifecycle under the same id meanwhile: its own row will be found next time.
      if (!observation.revision.startsWith(`pg${candidate.sid}.`)) return true
      const seqs: number[] = []
      const types: string[] = []
      const bodies: string[] = []
      for (const event of observation.events) {
        const text = eventText(event)
        if (text === undefined) continue
        seqs.push(event.seq)
        types.push(event.type.replace(/\p{Cs}/gu, '\uFFFD'))
        bodies.push(text)
      }
      const upTo = observation.from + observation.events.length
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
      return true
    } catch (error) {
      if (signal?.aborted) throw error
      // Deleted meanwhile: nothing to index.
      if (
        (error as { code?: string }).code === '23503' ||
        (error as { cause?: { code?: string } }).cause?.code === '23503' ||
        isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')
      )
        return true
      this.#logger.warn(`dsh: indexing the text of session '${id}' failed; search leaves it out until the next catch-up.`, error)
      return false
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
