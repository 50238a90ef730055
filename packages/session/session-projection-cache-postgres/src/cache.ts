import { consoleLogger, type Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import { keyOf, requireSchema, watchPool } from '@dsh/session-persistence-postgres'
import type {
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionSnapshot,
  SessionProjections,
} from '@dsh/session-projection'
import {
  checkpointIdentity,
  type ProjectionCacheMetrics,
  type SessionProjectionCache,
  SessionProjectionCacheError,
} from '@dsh/session-projection-cache'
import type pg from 'pg'
import { PostgresProjectionCacheError } from './errors.js'
import { CACHE_CHANNEL, CACHE_COMPONENT, CACHE_MIGRATIONS, migrateCache } from './schema.js'

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

interface DbRow {
  session_id: Buffer
  key: string
  identity: Buffer
  inherited: number
  state_version: number
  seq: number
  failed: boolean
  state: string | null
}

interface EncodedRow {
  readonly key: string
  readonly stateVersion: number
  readonly seq: number
  readonly failed: boolean
  readonly state: string | null
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
  if (options.migrate !== false) await migrateCache(options.pool)
  else await requireSchema(options.pool, CACHE_COMPONENT, CACHE_MIGRATIONS)
  const cache = new PgProjectionCache(options)
  await cache.refresh()
  if (options.listen !== false) await cache.listen()
  return cache
}

class PgProjectionCache implements PostgresProjectionCache {
  readonly #pool: pg.Pool
  readonly #projections: SessionProjections
  readonly #sessions: PostgresProjectionCacheOptions['sessions']
  readonly #logger: () => Logger
  readonly #metrics: ProjectionCacheMetrics = { hits: 0, misses: 0, writes: 0, failedWrites: 0, rebuilds: 0 }
  readonly #mirror = new Map<string, Map<string, MirrorRow>>()
  readonly #pending = new Set<Promise<boolean>>()
  /** Transactions at or above this xid may not have been seen yet. */
  #cursor: string | undefined
  #refreshing: Promise<void> | undefined
  #next: Promise<void> | undefined
  #listener: pg.PoolClient | undefined
  #closed = false

  constructor(options: PostgresProjectionCacheOptions) {
    const logger = options.logger
    this.#logger = typeof logger === 'function' ? logger : () => logger ?? consoleLogger
    this.#pool = options.pool
    this.#projections = options.projections
    this.#sessions = options.sessions
  }

  get metrics(): Readonly<ProjectionCacheMetrics> {
    return this.#metrics
  }

  cachedSnapshot(
    header: SessionHeader,
    inheritedEventCount: SessionLogOffset,
    keys: readonly ProjectionKey[],
  ): ProjectionSnapshot | undefined {
    if (this.#closed || keys.length === 0) return this.#miss()
    const identity = checkpointIdentity(header)
    const stored = this.#mirror.get(header.id)
    const rows: Record<string, ProjectionCheckpointRow> = {}
    for (const key of keys) {
      const stateVersion = this.#projections.stateVersionOf(key)
      if (stateVersion === undefined) return this.#miss()
      const row = stored?.get(key)
      // Every requested key must come from this exact lifecycle, cut and unit version.
      if (row === undefined || row.identity !== identity || row.inherited !== inheritedEventCount || row.stateVersion !== stateVersion)
        return this.#miss()
      rows[key] = decodeRow(row, key, header)
    }
    let snapshot: ProjectionSnapshot
    try {
      snapshot = this.#projections.viewCheckpoint(rows, keys)
    } catch (error) {
      throw new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_POISONED',
        `A cached row of session '${header.id}' fails its unit's schema; treat it as a miss.`,
        { cause: error },
      )
    }
    this.#metrics.hits++
    return snapshot
  }

  writeCheckpoint(session: Session): Promise<boolean> {
    return this.#track(this.#writeCheckpoint(session))
  }

  writeColdRows(session: Session, rows: ProjectionCheckpointRows): Promise<boolean> {
    return this.#track(this.#writeCold(session, rows))
  }

  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending])
  }

  #track(write: Promise<boolean>): Promise<boolean> {
    this.#pending.add(write)
    void write.finally(() => this.#pending.delete(write))
    return write
  }

  async #writeCheckpoint(session: Session): Promise<boolean> {
    if (this.#closed) return false
    let rows: EncodedRow[]
    try {
      // Rows first, flush second: every seq in them was appended before the
      // flush began, so the flush makes it durable before the row exists.
      rows = this.#encode(session, this.#projections.checkpoint(session))
      await this.#sessions.flush(session)
    } catch (error) {
      return this.#failed(session, error)
    }
    return this.#store(session, rows)
  }

  async #writeCold(session: Session, rows: ProjectionCheckpointRows): Promise<boolean> {
    if (this.#closed) return false
    let encoded: EncodedRow[]
    try {
      encoded = this.#encode(session, rows)
    } catch (error) {
      return this.#failed(session, error)
    }
    return encoded.length === 0 ? true : this.#store(session, encoded)
  }

  /**
   * One statement: the session's rows of other lifecycles or cuts go (keys
   * not being written), the written keys are upserted (the last write wins),
   * and the mirrors of every host are told.
   */
  async #store(session: Session, rows: readonly EncodedRow[]): Promise<boolean> {
    if (this.#closed) return false
    const identity = checkpointIdentity(session.header)
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
      return this.#failed(session, error)
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
    this.#metrics.writes++
    return true
  }

  /** JSON-encodes states now, while they are the states the rows describe. A unit whose state is not JSON is left out (and reported). */
  #encode(session: Session, rows: ProjectionCheckpointRows): EncodedRow[] {
    const out: EncodedRow[] = []
    for (const [key, row] of Object.entries(rows)) {
      let state: string | null | undefined
      try {
        state = row.failed === true ? null : row.state === undefined ? undefined : JSON.stringify(row.state)
      } catch (error) {
        this.#logger().warn(`dsh: the '${key}' state of session '${session.id}' is not JSON-serializable; it is not cached.`, error)
        continue
      }
      if (state === undefined) continue
      out.push({ key, stateVersion: row.stateVersion, seq: row.seq, failed: row.failed === true, state })
    }
    return out
  }

  // ----------------------------------------------------------------- mirror

  /**
   * Resolves after a refresh that started after this call, so every row
   * committed before the call is in the mirror. Calls during a refresh share
   * one follow-up refresh.
   */
  refresh(): Promise<void> {
    if (this.#closed) return Promise.resolve()
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
   * One snapshot: the rows of every transaction at or above the cursor, and
   * the snapshot's xmin as the next cursor (transactions below it had ended,
   * so their rows were visible here). Rows may be read twice, never missed.
   */
  async #refresh(): Promise<void> {
    const client = await this.#pool.connect()
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      const { rows: snap } = await client.query<{ xmin: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin')
      const { rows } = await client.query<DbRow>(
        `SELECT session_id, key, identity, inherited, state_version, seq, failed, state FROM dsh_projection_checkpoints
         WHERE $1::xid8 IS NULL OR xid >= $1::xid8`,
        [this.#cursor ?? null],
      )
      await client.query('COMMIT')
      for (const row of rows) {
        const id = row.session_id.toString('utf8')
        this.#mirrorOf(id).set(row.key, {
          identity: row.identity.toString('utf8'),
          inherited: row.inherited,
          stateVersion: row.state_version,
          seq: row.seq,
          failed: row.failed,
          state: row.state,
        })
      }
      this.#cursor = snap[0]!.xmin
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      this.#logger().warn(
        'dsh: refreshing the projection cache mirror from PostgreSQL failed; lookups may miss until the next refresh.',
        error,
      )
    } finally {
      client.release()
    }
  }

  /** LISTENs for writes of other hosts; a lost listener reconnects and refreshes once. */
  async listen(): Promise<void> {
    if (this.#closed) return
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (error) {
      this.#logger().warn('dsh: the projection cache cannot LISTEN for other hosts; retrying.', error)
      this.#relisten()
      return
    }
    const lost = () => {
      if (this.#listener !== client) return
      this.#listener = undefined
      client.release(true)
      this.#relisten()
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', (message) => {
      if (message.channel === CACHE_CHANNEL) void this.refresh()
    })
    try {
      await client.query(`LISTEN ${CACHE_CHANNEL}`)
    } catch {
      client.release(true)
      this.#relisten()
      return
    }
    if (this.#closed) {
      client.release(true)
      return
    }
    this.#listener = client
  }

  #relisten(): void {
    if (this.#closed) return
    const timer = setTimeout(() => {
      void this.listen().then(() => this.refresh())
    }, 100)
    timer.unref()
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    const listener = this.#listener
    this.#listener = undefined
    listener?.release(true)
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

  #failed(session: Session, error: unknown): false {
    this.#metrics.failedWrites++
    this.#logger().warn(
      `dsh: writing the projection checkpoint of session '${session.id}' failed; the cache stays stale (results are unaffected).`,
      error,
    )
    return false
  }

  #miss(): undefined {
    this.#metrics.misses++
    return undefined
  }
}

/** A mirrored row back into a checkpoint row; a state that is not JSON is poisoned. */
function decodeRow(row: MirrorRow, key: string, header: SessionHeader): ProjectionCheckpointRow {
  const seq = row.seq as ProjectionCheckpointRow['seq']
  if (row.failed) return { stateVersion: row.stateVersion, seq, state: null, failed: true }
  let state: unknown
  try {
    state = JSON.parse(row.state ?? '')
  } catch (error) {
    throw new SessionProjectionCacheError(
      'SESSION_PROJECTION_CACHE_POISONED',
      `The cached '${key}' row of session '${header.id}' is not valid JSON; treat it as a miss.`,
      { details: { key }, cause: error },
    )
  }
  return { stateVersion: row.stateVersion, seq, state }
}
