import type { Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import { Backoff, type ChannelListener, keyOf, listenChannel, watchPool } from '@dsh/session-persistence-postgres/backend'
import type { ProjectionCheckpointRow, ProjectionCheckpointRows, SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import { CheckpointCacheCore, decodeCheckpointRow, type EncodedCheckpointRow } from '@dsh/session-projection-cache/backend'
import type pg from 'pg'
import { PostgresProjectionCacheError } from './errors.js'
import { CACHE_CHANNEL, CACHE_SCHEMA } from './schema.js'

export interface PostgresProjectionCacheOptions {
  /** The pool shared with the PostgreSQL persistence (the same database). */
  readonly pool: pg.Pool
  readonly projections: SessionProjections
  /** Flushes a live session's log before its row is written (the `sessions` store). */
  readonly sessions: { flush(session: Session): Promise<void> }
  /** Create or upgrade the checkpoint table on open (default true). */
  readonly migrate?: boolean
  /** Follow other hosts' writes through LISTEN (default true). */
  readonly listen?: boolean
  /** Where fail-soft failures are reported; defaults to the console. */
  readonly logger?: Logger | (() => Logger)
}

/** The PostgreSQL checkpoint cache: the `sessionProjectionCache` contract plus mirror control. */
export interface PostgresProjectionCache extends SessionProjectionCache {
  /** Reads every row committed since the last refresh into the mirror (hosts call it on NOTIFY by themselves). */
  refresh(): Promise<void>
  /** Writes the final rows of a session that went cold (the store flushed its log already). */
  writeColdRows(session: Session, rows: ProjectionCheckpointRows): Promise<boolean>
  close(): void
}

/** A stored row, as the mirror keeps it. */
interface MirrorRow {
  readonly identity: string
  readonly inherited: number
  readonly stateVersion: number
  readonly seq: number
  readonly failed: boolean
  /** The state's JSON, parsed only on a hit. */
  readonly state: string | null
}

/** A row of one refresh: the snapshot's xmin, then a checkpoint row (all null when none changed). */
interface RefreshRow {
  xmin: string
  session_id: Buffer | null
  key: string | null
  identity: Buffer
  inherited: number
  state_version: number
  seq: number
  failed: boolean
  state: string | null
}

/**
 * Opens the cache: migrates, loads the whole table into a local mirror, and
 * LISTENs for other hosts' writes. `cachedSnapshot` is synchronous by
 * contract (rung 2 of the catalog's ladder reads it inline), so it answers
 * from the mirror: no database round trip and no log I/O per lookup.
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
  watchPool(options.pool)
  await CACHE_SCHEMA.open(options.pool, options.migrate !== false)
  const cache = new PgProjectionCache(options)
  await cache.refresh()
  if (options.listen !== false) await cache.listen()
  return cache
}

class PgProjectionCache extends CheckpointCacheCore<Promise<boolean>> implements PostgresProjectionCache {
  readonly #pool: pg.Pool
  readonly #mirror = new Map<string, Map<string, MirrorRow>>()
  /** Transactions at or above this xid may not have been seen yet. */
  #cursor: string | undefined
  #refreshing: Promise<void> | undefined
  #next: Promise<void> | undefined
  #listener: ChannelListener | undefined
  /** Retries a failed refresh (the server went away): a row missed meanwhile is read once it is back. */
  readonly #retry = new Backoff(() => void this.refresh())

  constructor(options: PostgresProjectionCacheOptions) {
    super(options)
    this.#pool = options.pool
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
    const row = this.#mirror.get(header.id)?.get(key)
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
    if (this.closed) return false
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
    const mirrored = this.#mirrorOf(session.id)
    for (const [key, row] of mirrored)
      if ((row.identity !== identity || row.inherited !== session.inheritedEventCount) && !rows.some((r) => r.key === key))
        mirrored.delete(key)
    for (const row of rows)
      mirrored.set(row.key, {
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
   * the cursor, and the snapshot's xmin as the next cursor (transactions
   * below it had ended, so their rows were visible here). Rows may be read
   * twice, never missed. Never rejects: a failure (the server went away)
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
         LEFT JOIN dsh_projection_checkpoints c ON $1::xid8 IS NULL OR c.xid >= $1::xid8`,
        [this.#cursor ?? null],
      ))
    } catch (error) {
      if (this.closed) return
      if (this.#retry.failures === 0)
        this.logger().warn(
          'dsh: refreshing the projection cache mirror from PostgreSQL failed; lookups may miss until it succeeds (retrying with backoff).',
          error,
        )
      this.#retry.failed()
      return
    }
    this.#retry.succeeded()
    for (const row of rows) {
      if (row.session_id === null || row.key === null) continue
      this.#mirrorOf(row.session_id.toString('utf8')).set(row.key, {
        identity: row.identity.toString('utf8'),
        inherited: row.inherited,
        stateVersion: row.state_version,
        seq: row.seq,
        failed: row.failed,
        state: row.state,
      })
    }
    this.#cursor = rows[0]!.xmin
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
    void this.#listener?.close()
    this.#listener = undefined
    this.#mirror.clear()
  }

  #mirrorOf(id: string): Map<string, MirrorRow> {
    let mirrored = this.#mirror.get(id)
    if (mirrored === undefined) {
      mirrored = new Map()
      this.#mirror.set(id, mirrored)
    }
    return mirrored
  }
}
