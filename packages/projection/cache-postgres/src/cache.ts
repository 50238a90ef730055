import type { Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import { Backoff, type ChannelListener, keyOf, listenChannel, watchPool } from '@dsh/session-persistence-postgres/backend'
import type { ProjectionCheckpointRow, ProjectionCheckpointRows, SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import { CheckpointCacheCore, decodeCheckpointRow, type EncodedCheckpointRow } from '@dsh/session-projection-cache/backend'
import type pg from 'pg'
import { PostgresProjectionCacheError } from './errors.js'
import { CheckpointMirror, DEFAULT_MIRROR_SESSIONS, type MirrorRow, type MirrorStats } from './mirror.js'
import { CACHE_CHANNEL, CACHE_SCHEMA } from './schema.js'

export interface PostgresProjectionCacheOptions {
  /** The pool shared with the PostgreSQL persistence (the same database). */
  readonly pool: pg.Pool
  readonly projections: SessionProjections
  /** Flushes a live session's log before its row is written (the `sessions` store). */
  readonly sessions: { flush(session: Session): Promise<void> }
  /** Create or upgrade the checkpoint table on open (default true). */
  readonly migrate?: boolean
  /** Only read rows, never write one (read-only hosts, a role that may only SELECT): no migration, and every write answers `false`. Default false. */
  readonly readOnly?: boolean
  /** Follow other hosts' writes through LISTEN (default true). */
  readonly listen?: boolean
  /** Where fail-soft failures are reported; defaults to the console. */
  readonly logger?: Logger | (() => Logger)
  /** Sessions whose rows the mirror keeps, the least recently used dropped first (default 10,000; README, "The mirror's bound"). */
  readonly mirrorSessions?: number
}

/** The PostgreSQL checkpoint cache: the `sessionProjectionCache` contract plus mirror control. */
export interface PostgresProjectionCache extends SessionProjectionCache {
  /** Reads every row committed since the last refresh into the mirror (hosts call it on NOTIFY by themselves). */
  refresh(): Promise<void>
  /** Writes the final rows of a session that went cold (the store flushed its log already). */
  writeColdRows(session: Session, rows: ProjectionCheckpointRows): Promise<boolean>
  /** What the mirror holds (never more sessions than its bound) and how often it went to the table. */
  readonly mirror: MirrorStats
  /** Resolves when no read of missed sessions from the table is running (tests; a retry waiting out an outage is not awaited). */
  mirrorIdle(): Promise<void>
  close(): void
}

/** Sessions one load reads from the table at most. */
const LOAD_BATCH = 256

/** A stored checkpoint row, as a statement returns it. */
interface CheckpointRow {
  session_id: Buffer
  key: string
  identity: Buffer
  inherited: number
  state_version: number
  seq: number
  failed: boolean
  state: string | null
}

/** A row of one refresh: the snapshot's xmin, then a checkpoint row (`session_id` and `key` null when none changed). */
type RefreshRow = Omit<CheckpointRow, 'session_id' | 'key'> & { xmin: string; session_id: Buffer | null; key: string | null }

/**
 * Opens the cache: migrates, loads the rows of the most recently written
 * sessions (up to the mirror's bound) into a local mirror, and LISTENs for
 * other hosts' writes. `cachedSnapshot` is synchronous by contract (rung 2
 * of the catalog's ladder reads it inline), so it answers from the mirror: no
 * database round trip and no log I/O per lookup. The mirror is an LRU of
 * sessions (`mirrorSessions`): a lookup of a session it does not hold misses
 * and asks for the session's rows from the table in the background
 * (batched, off the caller's path), so the next lookup answers from them.
 *
 * The mirror may lag the table (a missed notification, a write in flight on
 * another host), never lead it, and the table never leads the log: every
 * row is written after the log it describes was flushed. A lagging mirror
 * costs a miss or an older checkpoint of the same lifecycle and cut — both
 * correct — never a wrong value.
 */
export async function createPostgresProjectionCache(options: PostgresProjectionCacheOptions): Promise<PostgresProjectionCache> {
  if (options?.pool === undefined || options.projections === undefined || options.sessions === undefined) {
    throw new PostgresProjectionCacheError(
      'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS',
      'createPostgresProjectionCache needs { pool, projections, sessions }.',
    )
  }
  const mirrorSessions = options.mirrorSessions ?? DEFAULT_MIRROR_SESSIONS
  if (!Number.isSafeInteger(mirrorSessions) || mirrorSessions < 1) {
    throw new PostgresProjectionCacheError(
      'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS',
      `mirrorSessions must be a positive integer (sessions whose rows the mirror keeps), got ${String(mirrorSessions)}.`,
    )
  }
  watchPool(options.pool)
  await CACHE_SCHEMA.open(options.pool, options.migrate !== false && options.readOnly !== true)
  const cache = new PgProjectionCache(options, mirrorSessions)
  await cache.refresh()
  if (options.listen !== false) await cache.listen()
  return cache
}

class PgProjectionCache extends CheckpointCacheCore<Promise<boolean>> implements PostgresProjectionCache {
  readonly #pool: pg.Pool
  readonly #readOnly: boolean
  readonly #mirror: CheckpointMirror
  /** Sessions a lookup missed that are to be read from the table (at most the mirror's bound). */
  readonly #wanted = new Set<string>()
  #loading: Promise<void> | undefined
  #loads = 0
  #failedLoads = 0
  /** Retries a failed load (the server went away). */
  readonly #loadRetry = new Backoff(() => this.#startLoads())
  /** Transactions at or above this xid may not have been seen yet. */
  #cursor: string | undefined
  #refreshing: Promise<void> | undefined
  #next: Promise<void> | undefined
  #listener: ChannelListener | undefined
  /** Retries a failed refresh (the server went away): a row missed meanwhile is read once it is back. */
  readonly #retry = new Backoff(() => void this.refresh())

  constructor(options: PostgresProjectionCacheOptions, mirrorSessions: number) {
    super(options)
    this.#pool = options.pool
    this.#readOnly = options.readOnly === true
    this.#mirror = new CheckpointMirror(mirrorSessions)
  }

  get mirror(): MirrorStats {
    return {
      sessions: this.#mirror.size,
      rows: this.#mirror.rows,
      limit: this.#mirror.limit,
      evictions: this.#mirror.evictions,
      loads: this.#loads,
      failedLoads: this.#failedLoads,
    }
  }

  writeColdRows(session: Session, rows: ProjectionCheckpointRows): Promise<boolean> {
    return this.track(Promise.resolve(this.writeCold(session, rows)))
  }

  protected lookup(
    header: SessionHeader,
    identity: string,
    inheritedEventCount: SessionLogOffset,
    key: string,
    stateVersion: number,
  ): ProjectionCheckpointRow | undefined {
    const rows = this.#mirror.use(header.id)
    if (rows === undefined) {
      this.#want(header.id)
      return undefined
    }
    const row = rows.get(key)
    if (row === undefined || row.identity !== identity || row.inherited !== inheritedEventCount || row.stateVersion !== stateVersion)
      return undefined
    return decodeCheckpointRow(header, key, row)
  }

  /**
   * One statement: the session's rows of other lifecycles or cuts go (keys
   * not being written), the written keys are upserted (the last write wins),
   * and the mirrors of every host are told.
   */
  protected async store(session: Session, identity: string, rows: readonly EncodedCheckpointRow[]): Promise<boolean> {
    if (this.closed || this.#readOnly) return false
    const idBytes = Buffer.from(session.id, 'utf8')
    try {
      await this.#pool.query(
        `WITH d AS (
           DELETE FROM dsh_projection_checkpoints
           WHERE session_key = $1 AND (identity <> $3 OR inherited <> $4) AND NOT (key = ANY($5::text[])))
         INSERT INTO dsh_projection_checkpoints AS t (session_key, key, session_id, identity, inherited, state_version, seq, failed, state)
         SELECT $1, r.key, $2, $3, $4, r.state_version, r.seq, r.failed, r.state
         FROM unnest($5::text[], $6::integer[], $7::integer[], $8::boolean[], $9::text[]) AS r(key, state_version, seq, failed, state)
         ON CONFLICT (session_key, key) DO UPDATE SET
           session_id = EXCLUDED.session_id, identity = EXCLUDED.identity, inherited = EXCLUDED.inherited,
           state_version = EXCLUDED.state_version, seq = EXCLUDED.seq, failed = EXCLUDED.failed, state = EXCLUDED.state
         RETURNING pg_notify($10, '')`,
        [
          keyOf(idBytes),
          idBytes,
          Buffer.from(identity, 'utf8'),
          session.inheritedEventCount,
          rows.map((r) => r.key),
          rows.map((r) => r.stateVersion),
          rows.map((r) => r.seq),
          rows.map((r) => r.failed),
          rows.map((r) => r.state),
          CACHE_CHANNEL,
        ],
      )
    } catch (error) {
      return this.failed(session, error)
    }
    // Write-through: this host sees its own write at once.
    this.#mirror.retain(
      session.id,
      (key, row) => (row.identity === identity && row.inherited === session.inheritedEventCount) || rows.some((r) => r.key === key),
    )
    for (const row of rows)
      this.#mirror.set(session.id, row.key, {
        identity,
        inherited: session.inheritedEventCount,
        stateVersion: row.stateVersion,
        seq: row.seq,
        failed: row.failed,
        state: row.state,
      })
    this.counters.writes++
    return true
  }

  // ------------------------------------------------------------- forgetting

  protected canForget(): boolean {
    return !this.closed && !this.#readOnly
  }

  protected async forgetCursor(): Promise<string | undefined> {
    const { rows } = await this.#pool.query<{ cursor: string }>('SELECT cursor FROM dsh_projection_cache_feed')
    return rows[0]?.cursor
  }

  protected async heldSessions(among: readonly string[] | undefined): Promise<readonly string[]> {
    if (among?.length === 0) return []
    const { rows } = await this.#pool.query<{ session_id: Buffer }>(
      among === undefined
        ? 'SELECT DISTINCT session_id FROM dsh_projection_checkpoints'
        : 'SELECT DISTINCT session_id FROM dsh_projection_checkpoints WHERE session_key = ANY($1::bytea[])',
      among === undefined ? [] : [among.map((id) => keyOf(Buffer.from(id, 'utf8')))],
    )
    return rows.map((row) => row.session_id.toString('utf8'))
  }

  /**
   * One statement: the sessions' rows go and the feed cursor is stored.
   * This host's mirror drops them too; another host's keeps them until its
   * LRU drops them (a deleted session is not looked up: it is not listed).
   */
  protected async forgetRows(ids: readonly string[], cursor: string): Promise<void> {
    await this.#pool.query(
      `WITH d AS (DELETE FROM dsh_projection_checkpoints WHERE session_key = ANY($1::bytea[]))
       INSERT INTO dsh_projection_cache_feed (cursor) VALUES ($2) ON CONFLICT (one) DO UPDATE SET cursor = EXCLUDED.cursor`,
      [ids.map((id) => keyOf(Buffer.from(id, 'utf8'))), cursor],
    )
    for (const id of ids) {
      this.#mirror.forget(id)
      this.#wanted.delete(id)
    }
  }

  // ----------------------------------------------------------------- mirror

  /**
   * Resolves after a refresh that started after this call, so every row
   * committed before the call is in the mirror. Calls during a refresh share
   * one follow-up refresh.
   */
  refresh(): Promise<void> {
    if (this.closed) return Promise.resolve()
    if (this.#refreshing !== undefined) {
      this.#next ??= this.#refreshing.then(() => {
        this.#next = undefined
        return this.refresh()
      })
      return this.#next
    }
    this.#refreshing = this.#refresh().finally(() => {
      this.#refreshing = undefined
    })
    return this.#refreshing
  }

  /**
   * One statement, one snapshot: the rows of every transaction at or above
   * the cursor (the first time: the rows of the most recently written
   * sessions, as many as the mirror holds), and the snapshot's xmin as the
   * next cursor (transactions below it had ended, so their rows were visible
   * here). Rows may be read twice, never missed; rows of a session not held
   * (or dropped meanwhile) are read by the lookup that misses it. Rows are
   * applied oldest first, so the newest sessions stay held. Never rejects: a failure (the server went away)
   * leaves the cursor where it was, is logged once per outage, and is
   * retried with bounded backoff until a refresh succeeds.
   */
  async #refresh(): Promise<void> {
    let rows: RefreshRow[]
    try {
      ;({ rows } = await this.#pool.query<RefreshRow>(
        `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
                c.session_id, c.key, c.identity, c.inherited, c.state_version, c.seq, c.failed, c.state
         FROM (SELECT 1) one
         LEFT JOIN dsh_projection_checkpoints c
           ON CASE WHEN $1::xid8 IS NULL
                   THEN c.session_key IN (SELECT session_key FROM dsh_projection_checkpoints GROUP BY session_key
                                          ORDER BY max(xid::text::numeric) DESC LIMIT $2)
                   ELSE c.xid >= $1::xid8 END
         ORDER BY c.xid NULLS FIRST`,
        [this.#cursor ?? null, this.#mirror.limit],
      ))
    } catch (error) {
      this.#backgroundFailed(
        this.#retry,
        'dsh: refreshing the projection cache mirror from PostgreSQL failed; lookups may miss until it succeeds (retrying with backoff).',
        error,
      )
      return
    }
    this.#retry.succeeded()
    for (const row of rows) {
      if (row.session_id === null || row.key === null) continue
      this.#mirror.set(row.session_id.toString('utf8'), row.key, mirrorRow(row))
    }
    this.#cursor = rows[0]!.xmin
  }

  // ------------------------------------------------------- loads on a miss

  /**
   * Asks for a missed session's rows from the table, in the background. At
   * most the mirror's bound wait: beyond it the longest waiting is dropped
   * (the mirror could not hold it beside the newer ones anyway).
   */
  #want(id: string): void {
    if (this.closed) return
    this.#wanted.delete(id)
    this.#wanted.add(id)
    if (this.#wanted.size > this.#mirror.limit) this.#wanted.delete(this.#wanted.values().next().value as string)
    if (this.#loading === undefined && !this.#loadRetry.pending) this.#startLoads()
  }

  #startLoads(): void {
    if (this.closed || this.#loading !== undefined) return
    this.#loading = this.#loadWanted().finally(() => {
      this.#loading = undefined
      // A session wanted while the last statement ran, after the loop looked.
      if (this.#wanted.size > 0 && !this.#loadRetry.pending) this.#startLoads()
    })
  }

  /**
   * Reads the wanted sessions' rows, `LOAD_BATCH` sessions a statement, and
   * fills them in (`CheckpointMirror.fill`: a key written or refreshed
   * meanwhile is kept). Never rejects: a failure keeps the sessions wanted,
   * is logged once per outage and retried with backoff.
   */
  async #loadWanted(): Promise<void> {
    while (this.#wanted.size > 0 && !this.closed) {
      const ids = [...this.#wanted].slice(0, LOAD_BATCH)
      for (const id of ids) this.#wanted.delete(id)
      let rows: CheckpointRow[]
      try {
        ;({ rows } = await this.#pool.query<CheckpointRow>(
          `SELECT session_id, key, identity, inherited, state_version, seq, failed, state
           FROM dsh_projection_checkpoints WHERE session_key = ANY($1::bytea[])`,
          [ids.map((id) => keyOf(Buffer.from(id, 'utf8')))],
        ))
      } catch (error) {
        if (this.closed) return
        for (const id of ids) if (this.#wanted.size < this.#mirror.limit) this.#wanted.add(id)
        this.#failedLoads++
        this.#backgroundFailed(
          this.#loadRetry,
          'dsh: reading checkpoint rows from PostgreSQL after a mirror miss failed; those lookups miss until it succeeds (retrying with backoff).',
          error,
        )
        return
      }
      this.#loadRetry.succeeded()
      const loaded = new Map<string, Map<string, MirrorRow>>(ids.map((id) => [id, new Map()]))
      for (const row of rows) loaded.get(row.session_id.toString('utf8'))?.set(row.key, mirrorRow(row))
      if (this.closed) return
      for (const [id, sessionRows] of loaded) this.#mirror.fill(id, sessionRows)
      this.#loads += ids.length
    }
  }

  /** A background statement failed (the server went away): logged once per outage, retried with backoff. */
  #backgroundFailed(retry: Backoff, message: string, error: unknown): void {
    if (this.closed) return
    if (retry.failures === 0) this.logger().warn(message, error)
    retry.failed()
  }

  async mirrorIdle(): Promise<void> {
    while (this.#loading !== undefined) await this.#loading
  }

  /**
   * LISTENs for other hosts' writes on a dedicated connection that survives
   * an outage (`listenChannel`): each notice refreshes the mirror, and so
   * does each re-established LISTEN (notices sent meanwhile are gone).
   */
  async listen(): Promise<void> {
    if (this.closed || this.#listener !== undefined) return
    this.#listener = await listenChannel(this.#pool, CACHE_CHANNEL, {
      notify: () => void this.refresh(),
      resubscribed: () => void this.refresh(),
      failed: (error) => this.logger().warn('dsh: the projection cache cannot LISTEN for other hosts now; retrying with backoff.', error),
    })
    if (this.closed) await this.#listener.close()
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.#retry.stop()
    this.#loadRetry.stop()
    this.#wanted.clear()
    void this.#listener?.close()
    this.#listener = undefined
    this.#mirror.clear()
  }
}

function mirrorRow(row: Omit<CheckpointRow, 'session_id' | 'key'>): MirrorRow {
  return {
    identity: row.identity.toString('utf8'),
    inherited: row.inherited,
    stateVersion: row.state_version,
    seq: row.seq,
    failed: row.failed,
    state: row.state,
  }
}
