import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import type { Session, SessionHeader, SessionId, SessionLogOffset } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type {
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionSnapshot,
  SessionProjections,
} from '@dsh/session-projection'
import { SessionProjectionCacheError } from './errors.js'
import { checkpointIdentity } from './identity.js'
import type { ProjectionCacheMetrics, SessionProjectionCache } from './types.js'

/** A checkpoint row ready to store: its state as JSON text, taken when the row was (`null` for a failed unit). */
export interface EncodedCheckpointRow {
  readonly key: string
  readonly stateVersion: number
  readonly seq: number
  readonly failed: boolean
  readonly state: string | null
}

/**
 * What forgetting deleted sessions needs of persistence (service
 * `sessionPersistence`): its change feed, and `stat` to tell a session that
 * is gone from one that only changed.
 */
export type DeletedSessionFeed = Pick<SessionPersistence, 'changes' | 'stat'>

/** `stat` calls one forgetting pass has in flight at most. */
const STAT_CONCURRENCY = 16

export interface CheckpointCacheCoreOptions {
  readonly projections: SessionProjections
  /** Flushes a live session's log before its row is written (the `sessions` store). */
  readonly sessions: { flush(session: Session): Promise<void> }
  /** Where fail-soft failures are reported; defaults to the console. */
  readonly logger?: Logger | (() => Logger) | undefined
}

/**
 * What every checkpoint cache does the same way, whatever stores its rows.
 * Invariants: a lookup answers for every requested key from one lifecycle,
 * cut and unit version or misses as a whole; a live write takes the rows
 * first and flushes the log second, so a stored row never claims a seq that
 * is not durable; every write is fail-soft (a warning and `failedWrites`).
 *
 * A backend supplies the two storage steps: `lookup` (one key, already
 * matched against identity, cut and version; `undefined` is a miss; throws
 * only `SESSION_PROJECTION_CACHE_POISONED`) and `store` (one session's rows,
 * the last write wins; `false` after reporting through `failed`; `Stored`
 * says whether it is synchronous); and the four steps of forgetting deleted
 * sessions (`canForget`, `forgetCursor`, `heldSessions`, `forgetRows`, see
 * `forgetDeleted`).
 */
export abstract class CheckpointCacheCore<Stored extends boolean | Promise<boolean> = boolean | Promise<boolean>>
  implements SessionProjectionCache
{
  protected readonly projections: SessionProjections
  protected readonly logger: () => Logger
  protected readonly counters: ProjectionCacheMetrics = { hits: 0, misses: 0, writes: 0, failedWrites: 0, rebuilds: 0, forgotten: 0 }
  /** Set by `close()`: reads miss and writes resolve `false` from then on. */
  protected closed = false
  readonly #sessions: CheckpointCacheCoreOptions['sessions']
  readonly #pending = new Set<Promise<boolean>>()
  /** Forgetting passes in flight (`idle()` waits for them too). */
  readonly #passes = new Set<Promise<boolean>>()
  /** Forgetting passes failed in a row: the first of a streak is reported. */
  #passFailures = 0

  constructor(options: CheckpointCacheCoreOptions) {
    const logger = options.logger
    this.logger = typeof logger === 'function' ? logger : () => logger ?? consoleLogger
    this.projections = options.projections
    this.#sessions = options.sessions
  }

  get metrics(): Readonly<ProjectionCacheMetrics> {
    return this.counters
  }

  protected abstract lookup(
    header: SessionHeader,
    identity: string,
    inheritedEventCount: SessionLogOffset,
    key: ProjectionKey,
    stateVersion: number,
  ): ProjectionCheckpointRow | undefined

  protected abstract store(session: Session, identity: string, rows: readonly EncodedCheckpointRow[]): Stored

  /** Whether this cache may delete rows now: a writer whose storage takes writes (never a read-only cache). */
  protected abstract canForget(): boolean

  /** The change-feed cursor the last complete forgetting pass stored beside the rows; `undefined` when none was. */
  protected abstract forgetCursor(): string | undefined | Promise<string | undefined>

  /** Of the sessions `among` (every session, when `undefined`), those with rows stored. */
  protected abstract heldSessions(among: readonly string[] | undefined): readonly string[] | Promise<readonly string[]>

  /** Deletes every row of the sessions `ids` and stores `cursor`, together (both or neither). Throws when it cannot. */
  protected abstract forgetRows(ids: readonly string[], cursor: string): void | Promise<void>

  abstract close(): void

  cachedSnapshot(
    header: SessionHeader,
    inheritedEventCount: SessionLogOffset,
    keys: readonly ProjectionKey[],
  ): ProjectionSnapshot | undefined {
    if (this.closed || keys.length === 0) return this.miss()
    const identity = identityOf(header)
    const rows: Record<string, ProjectionCheckpointRow> = {}
    for (const key of keys) {
      const stateVersion = this.projections.stateVersionOf(key)
      if (stateVersion === undefined) return this.miss()
      // Every requested key must come from this exact lifecycle, cut and
      // unit version; anything else is a miss, never a partial answer.
      const row = this.lookup(header, identity, inheritedEventCount, key, stateVersion)
      if (row === undefined) return this.miss()
      rows[key] = row
    }
    let snapshot: ProjectionSnapshot
    try {
      snapshot = this.projections.viewCheckpoint(rows, keys)
    } catch (error) {
      throw new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_POISONED',
        `A cached row of session '${header.id}' fails its unit's schema; treat it as a miss.`,
        { cause: error },
      )
    }
    this.counters.hits++
    return snapshot
  }

  writeCheckpoint(session: Session): Promise<boolean> {
    return this.track(this.#writeCheckpoint(session))
  }

  async idle(): Promise<void> {
    while (this.#pending.size > 0 || this.#passes.size > 0) await Promise.allSettled([...this.#pending, ...this.#passes])
  }

  /**
   * One forgetting pass: deletes the rows of every session that persistence
   * does not hold (deleted), among the sessions its change feed names since the
   * cursor the last complete pass stored (every session with rows, when the
   * feed asks for a rescan), and stores the feed's new cursor with the
   * deletion. A session live in this process is never forgotten, nor one
   * whose log is there but damaged (`stat` fails `CORRUPT` or
   * `UNSUPPORTED_VERSION`). Writes in flight when the feed was read land
   * before the rows go, so a session written as it went cold and deleted
   * after is not written back. Run by the scheduler (a writer's own path),
   * never by a lookup. Fail-soft: resolves `false` when the pass could not
   * finish (the cursor stays, so the next pass looks again; the first
   * failure of a streak is a warning), or when this cache cannot forget
   * (read-only, closed, storage not writable now).
   */
  forgetDeleted(feed: DeletedSessionFeed, live: (id: string) => boolean): Promise<boolean> {
    const pass = this.#forgetDeleted(feed, live)
    this.#passes.add(pass)
    void pass.finally(() => this.#passes.delete(pass))
    return pass
  }

  async #forgetDeleted(feed: DeletedSessionFeed, live: (id: string) => boolean): Promise<boolean> {
    if (this.closed || !this.canForget()) return false
    try {
      const since = await this.forgetCursor()
      const changes = await feed.changes(since)
      const held = await this.heldSessions(changes.rescan ? undefined : changes.ids)
      const gone = await deletedAmong(
        feed,
        held.filter((id) => !live(id)),
      )
      // Nothing to delete and nowhere further to go: nothing is written.
      if (gone.length === 0 && changes.cursor === since) {
        this.#passFailures = 0
        return true
      }
      // A write in flight (a session that went cold, then was deleted) lands before its rows go, not after.
      await Promise.allSettled([...this.#pending])
      if (this.closed) return false
      const forgotten = gone.filter((id) => !live(id))
      await this.forgetRows(forgotten, changes.cursor)
      this.counters.forgotten += forgotten.length
      this.#passFailures = 0
      return true
    } catch (error) {
      if (this.#passFailures++ === 0 && !this.closed)
        this.logger().warn(
          'dsh: forgetting the projection checkpoints of deleted sessions failed; they stay until a later pass succeeds (results are unaffected).',
          error,
        )
      return false
    }
  }

  /** Counts a write as in flight until it settles (`idle()` waits for it). */
  protected track(write: Promise<boolean>): Promise<boolean> {
    this.#pending.add(write)
    void write.finally(() => this.#pending.delete(write))
    return write
  }

  async #writeCheckpoint(session: Session): Promise<boolean> {
    if (this.closed) return false
    let rows: readonly EncodedCheckpointRow[]
    try {
      // Rows first, flush second: every seq in them was appended before the
      // flush began, so the flush makes it durable before the row exists.
      rows = this.encode(session, this.projections.checkpoint(session))
      await this.#sessions.flush(session)
    } catch (error) {
      return this.failed(session, error)
    }
    return await this.store(session, checkpointIdentity(session.header), rows)
  }

  /**
   * The final rows of a session that just went cold, encoded; `true` when
   * there is nothing to write. The store flushed it before
   * `session/disposed`, so no flush is needed (or possible).
   */
  protected writeCold(session: Session, rows: ProjectionCheckpointRows): boolean | Stored {
    if (this.closed) return false
    let encoded: readonly EncodedCheckpointRow[]
    try {
      encoded = this.encode(session, rows)
    } catch (error) {
      return this.failed(session, error)
    }
    return encoded.length === 0 ? true : this.store(session, checkpointIdentity(session.header), encoded)
  }

  /** JSON-encodes states now, while they are the states the rows describe. A unit whose state is not JSON is left out (and reported). */
  protected encode(session: Session, rows: ProjectionCheckpointRows): EncodedCheckpointRow[] {
    const out: EncodedCheckpointRow[] = []
    for (const [key, row] of Object.entries(rows)) {
      let state: string | null | undefined
      try {
        state = row.failed === true ? null : row.state === undefined ? undefined : JSON.stringify(row.state)
      } catch (error) {
        this.logger().warn(`dsh: the '${key}' state of session '${session.id}' is not JSON-serializable; it is not cached.`, error)
        continue
      }
      if (state === undefined) continue
      out.push({ key, stateVersion: row.stateVersion, seq: row.seq, failed: row.failed === true, state })
    }
    return out
  }

  /** Reports a failed write (fail-soft): a warning and `failedWrites`. */
  protected failed(session: Session, error: unknown): false {
    this.counters.failedWrites++
    this.logger().warn(
      `dsh: writing the projection checkpoint of session '${session.id}' failed; the cache stays stale (results are unaffected).`,
      error,
    )
    return false
  }

  protected miss(): undefined {
    this.counters.misses++
    return undefined
  }
}

/**
 * Of `ids`, the sessions persistence does not hold (`stat` answers
 * `undefined`), asking at most `STAT_CONCURRENCY` at once. A log that is
 * there but cannot be read is not deleted; any other failure (the store is
 * unreachable) rejects, so the pass ends without moving its cursor.
 */
async function deletedAmong(feed: DeletedSessionFeed, ids: readonly string[]): Promise<string[]> {
  const gone: string[] = []
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++]!
      if (!(await persisted(feed, id))) gone.push(id)
    }
  }
  await Promise.all(Array.from({ length: Math.min(STAT_CONCURRENCY, ids.length) }, worker))
  return gone
}

async function persisted(feed: DeletedSessionFeed, id: string): Promise<boolean> {
  try {
    // An id read back from the cache's own rows: whatever it is, `stat` answers for it.
    return (await feed.stat(id as SessionId)) !== undefined
  } catch (error) {
    if (isDshError(error, 'SESSION_PERSISTENCE_CORRUPT', 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION')) return true
    throw error
  }
}

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

/** A stored row's parts back into a checkpoint row; `state` is the JSON text (ignored when failed). Not JSON: poisoned. */
export function decodeCheckpointRow(
  header: SessionHeader,
  key: string,
  row: { readonly stateVersion: number; readonly seq: number; readonly failed: boolean; readonly state: string | null },
): ProjectionCheckpointRow {
  const seq = row.seq as ProjectionCheckpointRow['seq']
  if (row.failed) return { stateVersion: row.stateVersion, seq, state: null, failed: true }
  let state: unknown
  try {
    state = JSON.parse(row.state ?? '')
  } catch (error) {
    throw poisonedRow(header, key, 'is not valid JSON', error)
  }
  return { stateVersion: row.stateVersion, seq, state }
}

/** `SESSION_PROJECTION_CACHE_POISONED` for one stored row (consumers treat it as a miss). */
export function poisonedRow(header: SessionHeader, key: string, why: string, cause?: unknown): SessionProjectionCacheError {
  return new SessionProjectionCacheError(
    'SESSION_PROJECTION_CACHE_POISONED',
    `The cached '${key}' row of session '${header.id}' ${why}; treat it as a miss.`,
    { details: { key }, ...(cause === undefined ? {} : { cause }) },
  )
}
