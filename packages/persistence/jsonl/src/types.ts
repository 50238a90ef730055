import type { AttachmentRef, SessionId } from '@dsh/session'
import type { AttachmentPutOptions, PersistenceMetrics, SessionPersistence, SessionRepairs, SessionWriter } from '@dsh/session-persistence'

/** How a root stores its logs: zstd frames, or plain JSON lines (fixtures and line tools). One root holds one encoding. */
export type JsonlCompression = 'zstd' | 'none'

export interface JsonlPersistenceOptions {
  /** The root directory; created (0700) if missing, unless `readOnly`. One root holds one encoding. */
  readonly root: string
  /**
   * `zstd` (default for a new root): zstd frames; `none`: plain JSON lines,
   * for fixtures and line tools. With `readOnly`, omitted means "what the root holds".
   */
  readonly compression?: JsonlCompression
  /**
   * Open an existing root for reading only: nothing is ever created or
   * written (no root, marker, journal or lock); a directory that is not a dsh
   * root fails with `JSONL_PERSISTENCE_NOT_A_ROOT`, and `append`, `load` and
   * `delete` reject with `SESSION_PERSISTENCE_READ_ONLY`. For commands that
   * only read (`dsh sessions`, `dsh verify`).
   */
  readonly readOnly?: boolean
  /** Time of the `turn/end {reason:'interrupted'}` events `load` writes (default `Date.now`). */
  readonly clock?: () => number
  /** Sessions whose writer (lock + open log) is kept between appends; the least recently used beyond this release theirs (default 256). */
  readonly maxOpenWriters?: number
  /** Logs whose header `list` reads at once (default 16). */
  readonly listConcurrency?: number
  /**
   * Bytes of change records past which a writer compacts the change journal
   * behind a horizon (default 1 MiB; see the README's change feed section
   * for the bound it gives).
   */
  readonly journalLimit?: number
  /** The cap on one attachment's bytes (default `ATTACHMENT_MAX_BYTES`, 20 MiB); more is `SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE`. */
  readonly attachmentMaxBytes?: number
}

/** The metrics of this backend: the contract's, all kept. */
export interface JsonlPersistenceMetrics extends PersistenceMetrics {
  rescans: number
  logOpens: number
  /** Appends by a fresh writer that verified only the log's tail (header, last batch and trailer). */
  tailVerifications: number
  /** Batches synced on the calling thread (a lone small batch); the others synced on the thread pool. */
  inlineSyncs: number
  /** Rescans `changes` answered because the cursor lay behind the change journal's compaction horizon (`rescanReason: 'behind-horizon'`); counted in `rescans` too. */
  horizonRescans: number
  /** Compactions of the change journal this instance's writers made. */
  journalCompactions: number
}

/** The embedded default backend, plus where it keeps things. */
export interface JsonlPersistence extends SessionPersistence {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly metrics: Readonly<JsonlPersistenceMetrics>
  /** The live process holding `id`'s writer lock (its lock file names it; a dead holder counts as none). */
  writerOf(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined>
  /** The log file of `id` (whether or not it exists). */
  logPath(id: string): string
  /** Stores attachment bytes as a private file beside the session's log (see the contract). */
  putAttachment(sessionId: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef>
  /** The bytes of an attachment of the session, or of the session its fork references. */
  readAttachment(sessionId: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array>
  /** Reads and checks one log in full (a fork's inherited prefix included), reporting its torn tail (bytes `load` would truncate). */
  verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification>
  /** Checks the root's change journal: whether a reader without a cursor could follow it, or why it must rescan. */
  verifyChangeJournal(): Promise<ChangeJournalVerification>
  /** Logs the last `list()` left out because their header unit is damaged or of an unsupported version. */
  damagedLogs(): readonly DamagedLog[]
  /**
   * Session directories that hold no log while no process is writing one (a
   * log removed outside dsh, or a creation that crashed before its first
   * append), which `list()` leaves out; one pass over the root, reads only.
   */
  logLessDirs(signal?: AbortSignal): Promise<readonly LogLessDir[]>
}

/** A session directory without a log (`logLessDirs`). */
export interface LogLessDir {
  readonly dir: string
  /** The session id the directory name encodes; `{ hashed: true }` for long ids (stored only in the header). */
  readonly id: string | { readonly hashed: true } | undefined
  readonly code: 'SESSION_PERSISTENCE_NOT_FOUND'
  readonly message: string
}

export interface ChangeJournalVerification {
  /** False when the journal is missing, its header damaged, or it holds damaged records (readers rescan once). */
  readonly ok: boolean
  readonly reason?: string
  /** Complete records read before the end or the damage. */
  readonly records: number
  /** Rescans this instance's `changes` answered so far. */
  readonly rescans: number
}

export interface LogVerification {
  readonly id: SessionId
  readonly events: number
  /** Bytes of the committed log (header unit and every committed batch). */
  readonly committedBytes: number
  /** Bytes after the committed log: an incomplete final batch that reads ignore. */
  readonly tornBytes: number
  /** For a fork stored by reference: the session whose log holds the inherited prefix (verified too). */
  readonly forkSource?: string
}

/** A session directory whose log header could not be read. */
export interface DamagedLog {
  readonly dir: string
  /** The session id the directory name encodes; `{ hashed: true }` for long ids (stored only in the header). */
  readonly id: string | { readonly hashed: true } | undefined
  /** CORRUPT: damaged, or not a session directory (a symlink, a file, a directory where the log should be, no permission); IO: unreadable. */
  readonly code: 'SESSION_PERSISTENCE_CORRUPT' | 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' | 'SESSION_PERSISTENCE_IO'
  readonly message: string
}

/**
 * What the backend's front (`create.ts`) has opened before the log side is
 * loaded: the root (its marker read or created), its change journal and the
 * metrics both sides count into.
 */
export interface OpenedRoot {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly metrics: JsonlPersistenceMetrics
  /** Records the begin/end of every change of a log (writable backends; the front closes it after `close()`). */
  readonly journal: ChangeRecorder | undefined
  /** The crash-repair rules `load` applies (the front's `repairs`). */
  readonly repairs: SessionRepairs
}

/** The change journal's writer side, as the log side uses it (`change-journal.ts`'s `JournalWriter`). */
export interface ChangeRecorder {
  /** Records the intent to change `id`; returns the operation token for `end`. */
  begin(id: string): string
  /** Records that the operation ended (committed or not). */
  end(id: string, op: string): void
}

/** Every operation that touches a log; the change feed and the journal's check stay with the front. */
export type LogBackend = Omit<JsonlPersistence, 'changes' | 'verifyChangeJournal'>
