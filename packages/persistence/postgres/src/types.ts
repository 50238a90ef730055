import type { SessionId } from '@dsh/session'
import type { PersistenceMetrics, SessionPersistence, SessionWriter } from '@dsh/session-persistence'
import type pg from 'pg'
import type { ChangeSubscription } from './change-feed.js'

export interface PostgresPersistenceOptions {
  /** A pool shared with the query and cache backends. Give this or `connectionString`. */
  readonly pool?: pg.Pool
  /** Opens a pool owned (and ended on `close`) by this instance, with `poolConfig`'s settings (a connect bound, TCP keepalive). */
  readonly connectionString?: string
  /**
   * With `connectionString`: how long a new connection may wait for the
   * server to answer, in milliseconds (default: the URL's `connect_timeout`,
   * else 10 s); past it, opening fails with `POSTGRES_PERSISTENCE_UNAVAILABLE`.
   * Refused with `pool`: a pool you give brings its own bound (`poolConfig`).
   */
  readonly connectTimeoutMs?: number
  /** Run the migrations on open (default true). With `false`, an unmigrated or newer database is refused. */
  readonly migrate?: boolean
  /**
   * Read-only (`dsh show`, `dsh verify`, …): no migration (an unmigrated or
   * newer database is refused), no lease, and every write — append, delete,
   * a load that would repair — is `SESSION_PERSISTENCE_READ_ONLY`.
   */
  readonly readOnly?: boolean
  /** Clock for the `time` of crash-repair events. */
  readonly clock?: () => number
  /**
   * Writer leases kept between writes (default 256); beyond it the least
   * recently written session's lease is given back (see README, "Operating notes").
   */
  readonly maxLeases?: number
  /**
   * Rows written to `dsh_changes` between two prunings of the change feed
   * (default 10,000; see README, "Change feed bound"): the table holds at
   * most about twice this many rows, and a follower that reads the feed less
   * often than once per this many materializations and deletes gets one
   * rescan (`rescanReason: 'behind-horizon'`).
   */
  readonly feedLimit?: number
  /** The cap on one attachment's bytes (default `ATTACHMENT_MAX_BYTES`, 20 MiB); more is `SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE`. */
  readonly attachmentMaxBytes?: number
}

/** The metrics of this backend: the contract's, all kept, and the change feed's pruning. */
export interface PostgresPersistenceMetrics extends PersistenceMetrics {
  rescans: number
  logOpens: number
  /** Rescans `changes` answered because the cursor lay behind the feed's pruning horizon (`rescanReason: 'behind-horizon'`); counted in `rescans` too. */
  horizonRescans: number
  /** Prunings of `dsh_changes` this instance made. */
  feedPrunes: number
  /** Reads of the server's lock table (`pg_locks`) by `writerOf`: one per round of calls made together. */
  lockTableReads: number
}

/** The PostgreSQL backend of service `sessionPersistence`. */
export interface PostgresPersistence extends SessionPersistence {
  /** The pool this instance reads through (share it with the query and cache backends). */
  readonly pool: pg.Pool
  readonly metrics: Readonly<PostgresPersistenceMetrics>
  /** Resolves when no check or pruning of the change feed this instance started is running (tests, shutdown). */
  feedIdle(): Promise<void>
  /**
   * Calls `listener` after other hosts (or this one) commit changes — LISTEN
   * on the change channel, no polling — and once after a lost listener
   * connection is restored (changes may have been missed: ask `changes`).
   * Never fails for an unreachable server: the LISTEN is retried with
   * bounded backoff and the listener called once it is established.
   */
  subscribe(listener: () => void): Promise<ChangeSubscription>
  readonly readOnly: boolean
  /** Reads and checks one log in full (a fork's inherited prefix included): every batch decompressed, its length, CRC32, JSON and seqs. */
  verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification>
  /** The process holding the session's writer lease (`writer-identity.ts`), or `undefined`: whether another host or process is writing it now. */
  writerOf(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined>
  /** Rows the last `list()` left out because their stored header does not parse. */
  damagedLogs(): readonly DamagedLog[]
}

/** What `verify` found: the same shape as the JSONL backend's (a table has no torn tail: `tornBytes` is 0). */
export interface LogVerification {
  readonly id: SessionId
  readonly events: number
  /** Bytes read to check it: the header and every batch body (compressed), a fork source's prefix included. */
  readonly committedBytes: number
  readonly tornBytes: 0
  /** For a fork stored by reference: the session whose log holds the inherited prefix. */
  readonly forkSource?: string
}

/** A session row whose header could not be read. */
export interface DamagedLog {
  readonly id: string
  readonly code: 'SESSION_PERSISTENCE_CORRUPT'
  readonly message: string
}
