import { consoleLogger, type Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import type {
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionSnapshot,
  SessionProjections,
} from '@dsh/session-projection'
import { CheckpointDatabase, type EncodedRow } from './database.js'
import { SessionProjectionCacheError } from './errors.js'
import { checkpointIdentity, rowWitness } from './identity.js'
import type { ProjectionCacheMetrics, SessionProjectionCache } from './types.js'

export interface SqliteProjectionCacheOptions {
  /** The database file, e.g. `projectionCachePath(root)`; created (with its directory) when missing. */
  readonly path: string
  readonly projections: SessionProjections
  /** Flushes a live session's log before its row is written (the `sessions` store). */
  readonly sessions: { flush(session: Session): Promise<void> }
  /** Where fail-soft failures are reported; defaults to the console. */
  readonly logger?: Logger | (() => Logger)
  /** Run SQLite's `quick_check` over the file on open (for `dsh verify`; default false). See `checkDatabase()`. */
  readonly check?: boolean
}

/**
 * The SQLite checkpoint cache (service `sessionProjectionCache`). One
 * checkpoint per session, identified by the header witness fields plus the
 * exact cut; one row per unit key. Reads are synchronous point lookups that
 * never touch the log; writes flush the log first, so a row never claims a
 * seq that is not durable.
 */
export class SqliteProjectionCache implements SessionProjectionCache {
  readonly #db: CheckpointDatabase
  readonly #projections: SessionProjections
  readonly #sessions: SqliteProjectionCacheOptions['sessions']
  readonly #logger: () => Logger
  readonly #metrics: ProjectionCacheMetrics = { hits: 0, misses: 0, writes: 0, failedWrites: 0, rebuilds: 0 }
  readonly #pending = new Set<Promise<boolean>>()
  #closed = false

  constructor(options: SqliteProjectionCacheOptions) {
    if (typeof options?.path !== 'string' || options.path.length === 0) {
      throw new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_INVALID_OPTIONS',
        'The projection cache needs a database file path (for example projectionCachePath(root)).',
      )
    }
    const logger = options.logger
    this.#logger = typeof logger === 'function' ? logger : () => logger ?? consoleLogger
    this.#projections = options.projections
    this.#sessions = options.sessions
    this.#db = new CheckpointDatabase(options.path, this.#logger, options.check === true)
  }

  /**
   * Runs SQLite's `quick_check` over the cache file (for `dsh verify`): `'ok'`,
   * or the problem found, after which the file was rebuilt empty (misses
   * until it refills); `'unavailable'` when the cache could not be opened.
   */
  checkDatabase(): string {
    return this.#db.check()
  }

  get path(): string {
    return this.#db.path
  }

  get metrics(): Readonly<ProjectionCacheMetrics> {
    this.#metrics.rebuilds = this.#db.rebuilds
    return this.#metrics
  }

  cachedSnapshot(
    header: SessionHeader,
    inheritedEventCount: SessionLogOffset,
    keys: readonly ProjectionKey[],
  ): ProjectionSnapshot | undefined {
    if (this.#closed || keys.length === 0) return this.#miss()
    const identity = identityOf(header)
    const rows: Record<string, ProjectionCheckpointRow> = {}
    for (const key of keys) {
      const stateVersion = this.#projections.stateVersionOf(key)
      if (stateVersion === undefined) return this.#miss()
      let stored: string | undefined
      try {
        stored = this.#db.read(header.id, key)
      } catch (error) {
        // Busy or damaged storage: derived data, so a miss (a damaged file was rebuilt already).
        this.#logger().warn(`dsh: reading the projection cache at ${this.#db.path} failed; treating it as a miss.`, error)
        return this.#miss()
      }
      // Every requested key must come from this exact lifecycle, cut and
      // unit version; anything else is a miss, never a partial answer.
      const witness = rowWitness(identity, inheritedEventCount, stateVersion)
      if (stored === undefined || !stored.startsWith(witness)) return this.#miss()
      rows[key] = decodePayload(stored.slice(witness.length), stateVersion, key, header)
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
    const write = this.#writeCheckpoint(session)
    this.#pending.add(write)
    void write.finally(() => this.#pending.delete(write))
    return write
  }

  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending])
  }

  async #writeCheckpoint(session: Session): Promise<boolean> {
    if (this.#closed) return false
    let rows: readonly EncodedRow[]
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

  /**
   * Writes the final rows of a session that just went cold. The store
   * flushed it before `session/disposed`, so no flush is needed (or possible:
   * the session is no longer live).
   */
  writeColdRows(session: Session, rows: ProjectionCheckpointRows): boolean {
    if (this.#closed) return false
    let encoded: readonly EncodedRow[]
    try {
      encoded = this.#encode(session, rows)
    } catch (error) {
      return this.#failed(session, error)
    }
    return encoded.length === 0 ? true : this.#store(session, encoded)
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#db.close()
  }

  #store(session: Session, rows: readonly EncodedRow[]): boolean {
    if (this.#closed) return false
    try {
      this.#db.write(session.id, checkpointIdentity(session.header), session.inheritedEventCount, rows)
    } catch (error) {
      return this.#failed(session, error)
    }
    this.#metrics.writes++
    return true
  }

  /** JSON-encodes states now, while they are the states the rows describe. A unit whose state is not JSON is left out (and reported). */
  #encode(session: Session, rows: ProjectionCheckpointRows): EncodedRow[] {
    const out: EncodedRow[] = []
    const identity = checkpointIdentity(session.header)
    for (const [key, row] of Object.entries(rows)) {
      let payload: string | undefined
      try {
        payload =
          row.failed === true ? JSON.stringify([row.seq]) : row.state === undefined ? undefined : JSON.stringify([row.seq, row.state])
        if (payload !== undefined) payload = rowWitness(identity, session.inheritedEventCount, row.stateVersion) + payload
      } catch (error) {
        this.#logger().warn(`dsh: the '${key}' state of session '${session.id}' is not JSON-serializable; it is not cached.`, error)
        continue
      }
      if (payload === undefined) continue
      out.push({ key, stateVersion: row.stateVersion, seq: row.seq, failed: row.failed === true, payload })
    }
    return out
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

/** `[seq, state]` or `[seq]` (failed), after the witness, back into a checkpoint row; anything else is poisoned. */
/**
 * Headers are deep-frozen, and a listing hands the same header object to
 * every lookup of its session: its identity is computed once per object.
 */
const identities = new WeakMap<SessionHeader, string>()

function identityOf(header: SessionHeader): string {
  let identity = identities.get(header)
  if (identity === undefined) {
    identity = checkpointIdentity(header)
    if (Object.isFrozen(header)) identities.set(header, identity)
  }
  return identity
}

function decodePayload(payload: string, stateVersion: number, key: string, header: SessionHeader): ProjectionCheckpointRow {
  let decoded: unknown
  try {
    decoded = JSON.parse(payload)
  } catch (error) {
    throw poisoned(key, header, 'is not valid JSON', error)
  }
  if (!Array.isArray(decoded) || (decoded.length !== 1 && decoded.length !== 2)) throw poisoned(key, header, 'is not a [seq, state] pair')
  const seq = decoded[0] as ProjectionCheckpointRow['seq']
  return decoded.length === 1 ? { stateVersion, seq, state: null, failed: true } : { stateVersion, seq, state: decoded[1] }
}

function poisoned(key: string, header: SessionHeader, why: string, cause?: unknown): SessionProjectionCacheError {
  return new SessionProjectionCacheError(
    'SESSION_PROJECTION_CACHE_POISONED',
    `The cached '${key}' row of session '${header.id}' ${why}; treat it as a miss.`,
    { details: { key }, ...(cause === undefined ? {} : { cause }) },
  )
}
