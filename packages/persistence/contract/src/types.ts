import type { AttachmentRef, SessionHeader, SessionId, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import type { AppendedEvent } from './event-runs.js'
import type { SessionRepairs } from './repair.js'

/**
 * An opaque token that changes whenever a session's durable log changes.
 * Compare with `===` only; never parse it.
 */
export type SessionRevision = string

/** What a persisted session's header frame says (no body was read). */
export interface PersistedSessionRecord {
  readonly header: SessionHeader
  /** The exact inherited cut, read from the physical header line. */
  readonly inheritedEventCount: SessionLogOffset
  readonly revision: SessionRevision
}

/** A body-bearing read: every committed event (deep-frozen). */
export interface SessionObservation extends PersistedSessionRecord {
  readonly events: readonly StoredSessionEvent[]
}

/** What `load` returns: a committed, repaired log ready to resume. */
export interface LoadedSession extends SessionObservation {
  /** True when `load` truncated a torn tail or closed an open turn with `turn/end {reason:'interrupted'}`. */
  readonly repaired: boolean
}

/** Identifies the session an append targets; used to materialize it on the first append. */
export interface AppendTarget {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /**
   * The session whose committed prefix `[0, inheritedEventCount)` this fork
   * inherits. Given on the first append of a seeded session, it lets a backend
   * store the fork as a reference to that prefix instead of a copy (the source
   * must already hold at least `inheritedEventCount` committed events). A
   * backend may always copy instead; absent, the seed's events are stored.
   */
  readonly forkSource?: SessionId
}

/** The process holding a session's writer lock (see `SessionPersistence.writerOf`). */
export interface SessionWriter {
  readonly pid: number
  readonly host: string
}

/** What `putAttachment` takes besides the bytes. */
export interface AttachmentPutOptions {
  /** IANA media type, `type/subtype` (e.g. `image/png`); parameters are kept as given. */
  readonly mediaType: string
  /** A display or file name, kept in the reference. */
  readonly name?: string
}

/** An opaque position in the change feed; pass it back to `changes`, never parse it. */
export type SessionChangeCursor = string

/** What changed since a cursor (see `SessionPersistence.changes`). */
export interface SessionChanges {
  /** Ids whose revision changed after `since` (created, appended, repaired, deleted), each once. */
  readonly ids: readonly SessionId[]
  /** Pass this to the next `changes` call. */
  readonly cursor: SessionChangeCursor
  /**
   * True when the feed cannot prove that `ids` is complete since `since`
   * (no `since` given, a missing, damaged or foreign feed, a cursor from
   * another lifecycle): the caller must rescan everything once (`list()`),
   * then continue from `cursor`. Never a wrong answer, only a costlier one.
   */
  readonly rescan: boolean
  /** With `rescan`, why, where the backend tells (see `SessionRescanReason`); absent otherwise. */
  readonly rescanReason?: SessionRescanReason
}

/**
 * Why `changes` asks for a rescan:
 * - `no-cursor`: no `since` was given;
 * - `unknown-cursor`: `since` is not a cursor of this feed (malformed, or from another store);
 * - `feed-lost`: the feed cannot vouch for what happened since `since` (it is
 *   missing, damaged, truncated or re-created, or the machine restarted);
 * - `behind-horizon`: the feed is bounded, and the records after `since` were
 *   compacted away (a follower that fell too far behind): the typed resync.
 *   The feed itself is sound; the follower rescans once and continues.
 */
export type SessionRescanReason = 'no-cursor' | 'unknown-cursor' | 'feed-lost' | 'behind-horizon'

/** A body-bearing read of the events from `from` on (see `SessionPersistence.inspectFrom`). */
export interface SessionSuffixObservation extends PersistedSessionRecord {
  /** The offset of `events[0]`. */
  readonly from: SessionLogOffset
  /** Every committed event with `seq >= from` (deep-frozen). */
  readonly events: readonly StoredSessionEvent[]
}

/**
 * Which events a ranged read returns (see `SessionPersistence.inspectRange`):
 * the offsets `[from, to)` clipped to the log, and of those at most the last
 * `limit`. Every field is optional: `{ limit: 20 }` is the log's last 20
 * events, `{ to: 500, limit: 100 }` the 100 before offset 500 (a history
 * page), `{ from: 40, to: 60 }` a window.
 */
export interface SessionRange {
  /** The first offset wanted (default 0). */
  readonly from?: SessionLogOffset
  /** The offset after the last one wanted (default, and clipped to, the log's end). */
  readonly to?: SessionLogOffset
  /** At most this many events, the last ones of `[from, to)` (default: all of them). */
  readonly limit?: number
}

/** A body-bearing read of a range of events (see `SessionPersistence.inspectRange`). */
export interface SessionRangeObservation extends PersistedSessionRecord {
  /** The offset of `events[0]`: where the range starts, clipped to the log (`from + events.length` is where it ends). */
  readonly from: SessionLogOffset
  /** The committed events of the range, ascending (deep-frozen). */
  readonly events: readonly StoredSessionEvent[]
  /** How many committed events the log holds, the inherited prefix included (its next offset). */
  readonly total: number
}

export interface AppendResult {
  readonly revision: SessionRevision
  /** The stored next offset after the batch. */
  readonly nextSeq: SessionLogOffset
}

/**
 * Counters every backend keeps, so tests and benchmarks can assert I/O
 * (header-only listing, one body read per cold child) instead of timing it.
 */
export interface PersistenceMetrics {
  /** Header frames read (by `list`, `stat`-free paths, …). */
  headerReads: number
  /** Whole-log reads (by `inspect` and `load`), counted once per physical read. */
  bodyReads: number
  /** Bytes read from storage, all reads included. */
  bytesRead: number
  /** Durable append batches. */
  appends: number
  /**
   * `changes` answers with `rescan: true` (no cursor, a missing, damaged,
   * truncated or foreign feed, a cursor from another lifecycle). Optional
   * for a backend outside this repository; every backend here keeps it.
   */
  rescans?: number
  /**
   * Of `rescans`, those answered `behind-horizon` (a follower behind a
   * bounded feed's pruning horizon). Optional: a backend whose feed is never
   * pruned omits it.
   */
  horizonRescans?: number
  /**
   * Session logs (files, rows) opened for any read or write. With `changes`
   * reporting nothing, a reader that trusts its index opens none: the proof
   * that opening an unchanged root costs O(changes), not O(sessions).
   */
  logOpens?: number
}

/** Options of `SessionPersistence.delete`. */
export interface DeleteOptions {
  /**
   * A session that forks reference (their logs hold only a reference to its
   * prefix) is refused with `SESSION_PERSISTENCE_REFERENCED`; with this set,
   * every dependant (transitively) is first rewritten to hold its inherited
   * prefix itself, then the session is deleted. Backends that store forks as
   * copies ignore it.
   */
  readonly materializeDependants?: boolean
}

/**
 * The persistence contract (service `sessionPersistence`). Every backend
 * passes the exported contract suite (`@dsh/session-persistence/testing`).
 */
export interface SessionPersistence {
  /**
   * Makes `events` durable; resolves only when they are. The first event's
   * seq must equal the stored next offset (else `SESSION_PERSISTENCE_CONFLICT`).
   * The first append materializes the session: its header is written with the
   * first batch, atomically. An empty batch only materializes. An item may be
   * a run of events given as columns (`StoredEventRun`): it is stored and read
   * back as exactly the events it stands for.
   */
  append(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult>
  /** Header-only records of every persisted session; reads only header frames. */
  list(signal?: AbortSignal): Promise<PersistedSessionRecord[]>
  /** Every committed event; never mutates storage. `SESSION_PERSISTENCE_NOT_FOUND` when absent. */
  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation>
  /**
   * The committed events with `seq >= from` (a suffix read: an index that
   * already holds the first `from` events, or a seeded child's own suffix).
   * A backend reads no more than it must to prove those events committed.
   */
  inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation>
  /**
   * The committed events of `range` and how many the log holds: a tail
   * (`{ limit }`), a page before an offset (`{ to, limit }`) or a window
   * (`{ from, to }`). A backend reads the batches that hold the range (found
   * from the log's end) and what proves them committed, not the whole log: a
   * read costs what it returns. A range inside a fork's inherited prefix is
   * read from the log that holds it. `SESSION_PERSISTENCE_INVALID_RANGE` for
   * a bound that is not a non-negative integer.
   */
  inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation>
  /**
   * Stores attachment bytes beside session `sessionId` (it need not be
   * persisted yet) and returns the reference an `image`/`file` block
   * carries: SHA-256-addressed, so equal bytes give an equal reference and
   * are stored once per session; at or below `ATTACHMENT_INLINE_MAX_BYTES`
   * the reference also carries the bytes (`data`). Bytes over the backend's
   * cap (`ATTACHMENT_MAX_BYTES`, 20 MiB, unless configured) are refused with
   * `SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE` and nothing is written.
   * Optional for a backend outside this repository; every backend here has it.
   */
  putAttachment?(sessionId: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef>
  /**
   * The bytes `digest` names, as the session stored them or as the session it
   * forks holds them (a fork reads its source's attachments through the
   * reference, never a copy). `SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND`
   * when neither does. A session whose attachment a fork still reads is
   * deleted only as a referenced source is (`SESSION_PERSISTENCE_REFERENCED`
   * unless `materializeDependants`, which hands the bytes to the dependants);
   * deleting a session removes the attachments nothing else reads.
   */
  readAttachment?(sessionId: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array>
  /**
   * The change feed: the ids whose revision changed since `since` (created,
   * appended, repaired, truncated, deleted), each once, exact across
   * processes writing the same storage. Without `since` (or with a cursor the
   * feed cannot continue) it answers `rescan: true` and a cursor from which
   * it can: list everything once, then follow the feed. An id may be reported
   * although its revision ended where it started (a failed append); a change
   * is never missed. Reads no session log. See `SessionChanges.rescan`.
   */
  changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges>
  /**
   * The live process holding session `id`'s writer lock, or `undefined` when
   * no process does (never written, closed, or its holder died): whether the
   * session is being written now, by this process or another. Reads no log.
   * Optional: a backend without cross-process writer locks omits it.
   */
  writerOf?(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined>
  /** Commits crash repair (the rules of `repairs`), then returns what a resume needs. */
  load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession>
  /** The current revision, or `undefined` when the session is not persisted. */
  stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined>
  /**
   * Explicit deletion only; nothing is ever deleted implicitly. Resolves
   * `false` when absent. A session that forks still reference is refused
   * with `SESSION_PERSISTENCE_REFERENCED` unless `materializeDependants`.
   */
  delete(id: SessionId, options?: DeleteOptions): Promise<boolean>
  readonly metrics: Readonly<PersistenceMetrics>
  /**
   * The crash-repair rules `load` applies (every backend has them; a wrapper
   * forwards its backend's). `sessionPersistencePlugin` provides them as
   * service `sessionRepairs`.
   */
  readonly repairs?: SessionRepairs | undefined
  /** Releases locks and handles. */
  close(): Promise<void>
}

declare module '@dsh/context' {
  interface Services {
    sessionPersistence: SessionPersistence
    /** The crash-repair rules of the backend behind `sessionPersistence`: register a rule for the events a package writes. */
    sessionRepairs: SessionRepairs
  }
}
