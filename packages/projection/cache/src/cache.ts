import type { Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import type { ProjectionCheckpointRow, ProjectionCheckpointRows, SessionProjections } from '@dsh/session-projection'
import { CheckpointCacheCore, type EncodedCheckpointRow, poisonedRow } from './core.js'
import { CheckpointDatabase } from './database.js'
import { SessionProjectionCacheError } from './errors.js'
import { rowWitness } from './identity.js'
import type { ProjectionCacheMetrics } from './types.js'

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
  /**
   * Hosts that only read (`dsh sessions`, `show`, `agents`): open the file
   * read-only if it exists, and never write, create, rebuild or remove
   * anything. Writes are skipped (they resolve `false`, without a warning).
   */
  readonly readOnly?: boolean
}

/**
 * The SQLite checkpoint cache (service `sessionProjectionCache`). One
 * checkpoint per session, identified by the header witness fields plus the
 * exact cut; one row per unit key. Reads are synchronous point lookups that
 * never touch the log; writes flush the log first, so a row never claims a
 * seq that is not durable (those rules: `CheckpointCacheCore`).
 */
export class SqliteProjectionCache extends CheckpointCacheCore<boolean> {
  readonly #db: CheckpointDatabase

  constructor(options: SqliteProjectionCacheOptions) {
    if (typeof options?.path !== 'string' || options.path.length === 0) {
      throw new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_INVALID_OPTIONS',
        'The projection cache needs a database file path (for example projectionCachePath(root)).',
      )
    }
    super(options)
    this.#db = new CheckpointDatabase(options.path, this.logger, { check: options.check === true, readOnly: options.readOnly === true })
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

  /**
   * Why the file cannot be read or written now — `SESSION_PROJECTION_CACHE_UNAVAILABLE`
   * with `details: { path, state }` (`CacheFileState`: `missing`, `corrupt`,
   * `schema`, `full`, `read-only`, `locked`, `not-a-directory`, `io`) — or
   * `undefined` when it is open for everything this cache does.
   */
  get unavailable(): SessionProjectionCacheError | undefined {
    return this.#db.unavailable
  }

  override get metrics(): Readonly<ProjectionCacheMetrics> {
    this.counters.rebuilds = this.#db.rebuilds
    return this.counters
  }

  /**
   * Writes the final rows of a session that just went cold. The store
   * flushed it before `session/disposed`, so no flush is needed (nor
   * possible: the session is not live).
   */
  writeColdRows(session: Session, rows: ProjectionCheckpointRows): boolean {
    return this.writeCold(session, rows)
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.#db.close()
  }

  protected lookup(
    header: SessionHeader,
    identity: string,
    inheritedEventCount: SessionLogOffset,
    key: string,
    stateVersion: number,
  ): ProjectionCheckpointRow | undefined {
    let stored: string | undefined
    try {
      stored = this.#db.read(header.id, key)
    } catch (error) {
      // Busy or damaged storage: derived data, so a miss (a damaged file was rebuilt already).
      this.logger().warn(`dsh: reading the projection cache at ${this.#db.path} failed; treating it as a miss.`, error)
      return undefined
    }
    const witness = rowWitness(identity, inheritedEventCount, stateVersion)
    if (stored === undefined || !stored.startsWith(witness)) return undefined
    return decodePayload(stored.slice(witness.length), stateVersion, key, header)
  }

  protected canForget(): boolean {
    return !this.closed && this.#db.writable
  }

  protected forgetCursor(): string | undefined {
    return this.#db.forgetCursor()
  }

  protected heldSessions(among: readonly string[] | undefined): readonly string[] {
    return this.#db.heldSessions(among)
  }

  protected forgetRows(ids: readonly string[], cursor: string): void {
    this.#db.forget(ids, cursor)
  }

  protected store(session: Session, identity: string, rows: readonly EncodedCheckpointRow[]): boolean {
    if (this.closed || this.#db.readOnly) return false
    try {
      this.#db.write(
        session.id,
        identity,
        session.inheritedEventCount,
        rows.map((row) => ({
          key: row.key,
          stateVersion: row.stateVersion,
          seq: row.seq,
          failed: row.failed,
          // The stored payload: the witness, then `[seq, state]` or `[seq]` (failed).
          payload: `${rowWitness(identity, session.inheritedEventCount, row.stateVersion)}${row.failed ? `[${row.seq}]` : `[${row.seq},${row.state}]`}`,
        })),
      )
    } catch (error) {
      return this.failed(session, error)
    }
    this.counters.writes++
    return true
  }
}

/** `[seq, state]` or `[seq]` (failed), after the witness, back into a checkpoint row; anything else is poisoned. */
export function decodePayload(payload: string, stateVersion: number, key: string, header: SessionHeader): ProjectionCheckpointRow {
  let decoded: unknown
  try {
    decoded = JSON.parse(payload)
  } catch (error) {
    throw poisonedRow(header, key, 'is not valid JSON', error)
  }
  if (!Array.isArray(decoded) || (decoded.length !== 1 && decoded.length !== 2))
    throw poisonedRow(header, key, 'is not a [seq, state] pair')
  const seq = decoded[0] as ProjectionCheckpointRow['seq']
  return decoded.length === 1 ? { stateVersion, seq, state: null, failed: true } : { stateVersion, seq, state: decoded[1] }
}
