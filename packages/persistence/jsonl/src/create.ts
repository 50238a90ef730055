import { isAbsolute, join, resolve } from 'node:path'
import { throwIfAborted } from '@dsh/context'
import type { AttachmentRef, SessionId, SessionLogOffset } from '@dsh/session'
import type {
  AppendedEvent,
  AppendResult,
  AppendTarget,
  AttachmentPutOptions,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  SessionChangeCursor,
  SessionChanges,
  SessionObservation,
  SessionRange,
  SessionRangeObservation,
  SessionRevision,
  SessionSuffixObservation,
  SessionWriter,
} from '@dsh/session-persistence'
import { persistenceCancelled as cancelled, SessionRepairs } from '@dsh/session-persistence/backend'
import { JournalWriter } from './change-journal.js'
import { checkJournal, readJournalChanges } from './change-journal-reader.js'
import { closedError, ioError, JsonlPersistenceError } from './errors.js'
import { encodeSessionDirName } from './id-encoding.js'
import { LOG_FILE_NAMES, openRoot } from './root-marker.js'
import type {
  ChangeJournalVerification,
  DamagedLog,
  JsonlCompression,
  JsonlPersistence,
  JsonlPersistenceMetrics,
  JsonlPersistenceOptions,
  LogBackend,
  LogLessDir,
  LogVerification,
} from './types.js'

/**
 * The backend's front: what opening a root, following its change feed and
 * closing cost, and nothing more.
 *
 * Invariants: opening a root reads (or creates) its marker and, when
 * writable, opens its change journal — synchronously, so a bad root fails at
 * `createJsonlPersistence` — and loads none of the log modules (codec, zstd
 * frames, log format, scanner, reader, forks, writer lock; `persistence.ts`
 * and what it imports). `changes()`, `verifyChangeJournal()`, `logPath()`,
 * `metrics` and `close()` are answered here. The first operation that touches
 * a log loads them with one dynamic import shared by every later operation;
 * operations run in the order they were called, as if nothing were loaded
 * lazily. A `dsh sessions` on an unchanged root thus loads 12 of the
 * package's modules instead of all of them (`tests/lazy-modules.e2e.spec.ts`).
 */

/** Creates the embedded default backend over `options.root` (see the package README). */
export function createJsonlPersistence(options: JsonlPersistenceOptions): JsonlPersistence {
  return new JsonlPersistenceFront(options)
}

class JsonlPersistenceFront implements JsonlPersistence {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly #options: JsonlPersistenceOptions
  readonly #logFileName: string
  /** Counted by both sides: the front counts rescans, the log side everything else. */
  readonly #metrics: JsonlPersistenceMetrics = {
    headerReads: 0,
    bodyReads: 0,
    bytesRead: 0,
    appends: 0,
    rescans: 0,
    logOpens: 0,
    tailVerifications: 0,
    inlineSyncs: 0,
    horizonRescans: 0,
    journalCompactions: 0,
  }
  /** Appends begin/end records around every change of a log (writable instances); opened at once so followers of a new root see its first change. */
  readonly #journal: JournalWriter | undefined
  /** The log side, once its modules are loaded (see `persistence.ts`). */
  #backend: Promise<LogBackend> | undefined
  #loaded: LogBackend | undefined
  readonly repairs = new SessionRepairs()
  #closed = false

  constructor(options: JsonlPersistenceOptions) {
    if (typeof options?.root !== 'string' || options.root.length === 0) {
      throw new JsonlPersistenceError('JSONL_PERSISTENCE_INVALID_OPTIONS', 'createJsonlPersistence needs a root directory path.')
    }
    const requested = options.compression
    if (requested !== undefined && requested !== 'zstd' && requested !== 'none') {
      throw new JsonlPersistenceError(
        'JSONL_PERSISTENCE_INVALID_OPTIONS',
        `compression must be 'zstd' or 'none', got ${JSON.stringify(requested)}.`,
      )
    }
    const cap = options.attachmentMaxBytes
    if (cap !== undefined && (!Number.isSafeInteger(cap) || cap < 1)) {
      throw new JsonlPersistenceError(
        'JSONL_PERSISTENCE_INVALID_OPTIONS',
        `attachmentMaxBytes must be a positive whole number of bytes, got ${JSON.stringify(cap)}.`,
      )
    }
    const limit = options.journalLimit
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
      throw new JsonlPersistenceError(
        'JSONL_PERSISTENCE_INVALID_OPTIONS',
        `journalLimit must be a positive whole number of bytes, got ${JSON.stringify(limit)}.`,
      )
    }
    this.#options = options
    this.root = isAbsolute(options.root) ? options.root : resolve(options.root)
    this.readOnly = options.readOnly === true
    this.compression = openRoot(this.root, requested ?? (this.readOnly ? undefined : 'zstd'), this.readOnly)
    this.#logFileName = LOG_FILE_NAMES[this.compression]
    this.#journal = this.readOnly ? undefined : this.#openJournal(options)
  }

  /** The root's change journal, opened (created if needed) for writing; a failure is `SESSION_PERSISTENCE_IO`, the errno in `cause`. */
  #openJournal(options: JsonlPersistenceOptions): JournalWriter {
    try {
      return new JournalWriter(this.root, {
        ...(options.journalLimit === undefined ? {} : { limit: options.journalLimit }),
        onCompaction: () => {
          this.#metrics.journalCompactions++
        },
      })
    } catch (error) {
      throw ioError(`open the change journal of the root ${this.root}`, error)
    }
  }

  get metrics(): Readonly<JsonlPersistenceMetrics> {
    return this.#metrics
  }

  logPath(id: string): string {
    return join(this.root, encodeSessionDirName(id), this.#logFileName)
  }

  damagedLogs(): readonly DamagedLog[] {
    // Only `list()` finds damaged logs, and it loads the log side.
    return this.#loaded?.damagedLogs() ?? []
  }

  // ------------------------------------------------- the log side, on first use

  append(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    return this.#logs((b) => b.append(target, events))
  }

  load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    return this.#logs((b) => b.load(id, signal))
  }

  delete(id: SessionId, options?: DeleteOptions): Promise<boolean> {
    return this.#logs((b) => b.delete(id, options))
  }

  list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    return this.#logs((b) => b.list(signal))
  }

  logLessDirs(signal?: AbortSignal): Promise<readonly LogLessDir[]> {
    return this.#logs((b) => b.logLessDirs(signal))
  }

  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    return this.#logs((b) => b.inspect(id, signal))
  }

  inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    return this.#logs((b) => b.inspectFrom(id, from, signal))
  }

  inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    return this.#logs((b) => b.inspectRange(id, range, signal))
  }

  stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    return this.#logs((b) => b.stat(id, signal))
  }

  writerOf(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined> {
    return this.#logs((b) => b.writerOf(id, signal))
  }

  verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification> {
    return this.#logs((b) => b.verify(id, signal))
  }

  putAttachment(sessionId: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef> {
    return this.#logs((b) => b.putAttachment(sessionId, bytes, options))
  }

  readAttachment(sessionId: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array> {
    return this.#logs((b) => b.readAttachment(sessionId, digest, signal))
  }

  /**
   * Runs `operation` on the log side, loading it first if needed (one import
   * shared by every caller). Once loaded, an operation is called at once, on
   * the caller's turn — so an append takes its events as they are when it is
   * called — and before that, in call order: `#loaded` is set by the first
   * reaction to the load, ahead of every operation queued behind it, so a
   * later call can never overtake an earlier one.
   */
  #logs<T>(operation: (backend: LogBackend) => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(closedError(this.root))
    if (this.#loaded !== undefined) {
      try {
        return operation(this.#loaded)
      } catch (error) {
        return Promise.reject(error as Error)
      }
    }
    if (this.#backend === undefined) {
      this.#backend = import('./persistence.js').then((m) =>
        m.openLogBackend(this.#options, {
          root: this.root,
          compression: this.compression,
          readOnly: this.readOnly,
          metrics: this.#metrics,
          journal: this.#journal,
          repairs: this.repairs,
        }),
      )
      this.#backend.then(
        (backend) => {
          this.#loaded = backend
        },
        () => {},
      )
    }
    return this.#backend.then(operation)
  }

  // ------------------------------------------------------------ the change feed

  /** Reads only the root's journal, never a log (see `change-journal-reader.ts`). */
  async changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    this.#assertOpen()
    throwIfAborted(signal, cancelled)
    const result = await readJournalChanges(this.root, since)
    throwIfAborted(signal, cancelled)
    const ids = Object.freeze(result.ids as SessionId[])
    if (!result.rescan) return Object.freeze({ ids, cursor: result.cursor, rescan: false })
    this.#metrics.rescans++
    if (result.reason === 'behind-horizon') this.#metrics.horizonRescans++
    return Object.freeze({
      ids,
      cursor: result.cursor,
      rescan: true,
      ...(result.reason === undefined ? {} : { rescanReason: result.reason }),
    })
  }

  async verifyChangeJournal(): Promise<ChangeJournalVerification> {
    this.#assertOpen()
    const checked = await checkJournal(this.root)
    return Object.freeze({
      ok: checked.ok,
      ...(checked.reason === undefined ? {} : { reason: checked.reason }),
      records: checked.records,
      rescans: this.#metrics.rescans,
    })
  }

  // ------------------------------------------------------------------ lifecycle

  /** Waits for operations already called, releases every writer, then closes the journal (their `end` records written first). */
  async close(): Promise<void> {
    this.#closed = true
    try {
      if (this.#backend !== undefined) await (await this.#backend).close()
    } finally {
      this.#journal?.close()
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw closedError(this.root)
  }
}
