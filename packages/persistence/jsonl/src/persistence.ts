import { join } from 'node:path'
import { throwIfAborted } from '@dsh/context'
import { type AttachmentRef, type SessionId, SessionLogOffset } from '@dsh/session'
import type {
  AppendResult,
  AppendTarget,
  AttachmentPutOptions,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  SessionObservation,
  SessionRange,
  SessionRangeObservation,
  SessionRevision,
  SessionSuffixObservation,
  SessionWriter,
} from '@dsh/session-persistence'
import {
  type AppendedEvent,
  ATTACHMENT_MAX_BYTES,
  persistenceCancelled as cancelled,
  checkRange,
  persistenceError,
} from '@dsh/session-persistence/backend'
import { AttachmentFiles, checkAttachmentId, readOnlyAttachments } from './attachments.js'
import { createCodec } from './codec.js'
import { closedError } from './errors.js'
import { ChangeFeed } from './feed.js'
import { Forks } from './forks.js'
import { assertStorableId, encodeSessionDirName } from './id-encoding.js'
import type { LogContext } from './log-context.js'
import { findLogLessDirs } from './log-less-dirs.js'
import { LogReader } from './log-reader.js'
import { Reads } from './reads.js'
import { LOCK_FILE } from './session-writer.js'
import type {
  DamagedLog,
  JsonlCompression,
  JsonlPersistenceMetrics,
  JsonlPersistenceOptions,
  LogBackend,
  LogLessDir,
  LogVerification,
  OpenedRoot,
} from './types.js'
import { Appender } from './writer.js'
import { liveHolder } from './writer-lock.js'
import { WriterPool } from './writers.js'

/**
 * The log side of the embedded default backend, loaded by
 * `createJsonlPersistence`'s front at its first operation on a log. A
 * facade over its rooms:
 *
 * - `writer.ts` — the append path and `load`'s repair (`Appender`);
 *   `create-log.ts` publishes a session's first append;
 * - `writers.ts` — the open writers and the per-session order of operations
 *   (`WriterPool`); `session-writer.ts` opens one (lock, tail check);
 * - `forks.ts` — forks by reference and deletes;
 * - `attachments.ts` — attachment files beside a log (`putAttachment`, `readAttachment`);
 * - `reads.ts` — `inspect`, `verify`, `inspectFrom`, `inspectRange`, `stat`,
 *   `list` (`log-range.ts` reads a range of batches from the end back);
 * - `feed.ts` — the change journal records around every change.
 *
 * Arguments are checked here, on the caller's turn; an operation that
 * changes a session runs on that session's chain.
 */
export function openLogBackend(options: JsonlPersistenceOptions, opened: OpenedRoot): LogBackend {
  return new JsonlLogBackend(options, opened)
}

class JsonlLogBackend implements LogBackend {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly #metrics: JsonlPersistenceMetrics
  readonly #reader: LogReader
  readonly #writers: WriterPool
  readonly #forks: Forks
  readonly #appender: Appender
  readonly #reads: Reads
  readonly #attachments: AttachmentFiles
  #closed = false

  constructor(options: JsonlPersistenceOptions, opened: OpenedRoot) {
    this.root = opened.root
    this.compression = opened.compression
    this.readOnly = opened.readOnly
    this.#metrics = opened.metrics
    const codec = createCodec(this.compression)
    this.#reader = new LogReader(this.root, codec, this.#metrics)
    const ctx: LogContext = { root: this.root, codec, metrics: this.#metrics, reader: this.#reader, feed: new ChangeFeed(opened.journal) }
    this.#writers = new WriterPool(ctx, Math.max(1, options.maxOpenWriters ?? 256))
    this.#attachments = new AttachmentFiles(ctx, options.attachmentMaxBytes ?? ATTACHMENT_MAX_BYTES)
    this.#forks = new Forks(ctx, this.#writers, this.#attachments)
    this.#appender = new Appender(ctx, this.#writers, this.#forks, options.clock ?? Date.now, opened.repairs)
    this.#reads = new Reads(ctx, Math.max(1, options.listConcurrency ?? 16))
  }

  get metrics(): Readonly<JsonlPersistenceMetrics> {
    return this.#metrics
  }

  logPath(id: string): string {
    return this.#reader.logPath(id)
  }

  damagedLogs(): readonly DamagedLog[] {
    return this.#reads.damagedLogs()
  }

  append(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    try {
      this.#assertWritable()
      assertStorableId(target?.header?.id)
      SessionLogOffset(target.inheritedEventCount)
      if (target.forkSource !== undefined) assertStorableId(target.forkSource)
      if (!Array.isArray(events)) throw persistenceError('SESSION_PERSISTENCE_INVALID_EVENT', 'append needs an array of events.')
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#appender.append(target, events)
  }

  load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    try {
      this.#assertWritable()
      assertStorableId(id)
      throwIfAborted(signal, cancelled)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#writers.serial(id, () => this.#appender.load(id, signal))
  }

  delete(id: SessionId, options: DeleteOptions = {}): Promise<boolean> {
    try {
      this.#assertWritable()
      assertStorableId(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#writers.serial(id, () => this.#forks.delete(id, options))
  }

  /** On the session's chain, so a put and a delete of the same session never interleave. */
  putAttachment(id: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef> {
    try {
      this.#assertOpen()
      if (this.readOnly) throw readOnlyAttachments(this.root)
      checkAttachmentId(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#writers.serial(id, () => this.#attachments.put(id, bytes, options))
  }

  async readAttachment(id: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array> {
    this.#assertOpen()
    checkAttachmentId(id)
    throwIfAborted(signal, cancelled)
    return this.#attachments.read(id, digest)
  }

  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    this.#assertReadable(id)
    return this.#reads.inspect(id, signal)
  }

  async verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification> {
    this.#assertReadable(id)
    return this.#reads.verify(id, signal)
  }

  async inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    this.#assertReadable(id)
    return this.#reads.inspectFrom(id, from, signal)
  }

  async inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    this.#assertReadable(id)
    return this.#reads.inspectRange(id, checkRange(range), signal)
  }

  async stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    this.#assertReadable(id)
    return this.#reads.stat(id, signal)
  }

  /** Reads the session's lock file only, never its log. */
  async writerOf(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined> {
    this.#assertReadable(id)
    throwIfAborted(signal, cancelled)
    const holder = await liveHolder(join(this.root, encodeSessionDirName(id), LOCK_FILE))
    throwIfAborted(signal, cancelled)
    return holder === undefined ? undefined : Object.freeze({ pid: holder.pid, host: holder.host })
  }

  async list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    this.#assertOpen()
    return this.#reads.list(signal)
  }

  async logLessDirs(signal?: AbortSignal): Promise<readonly LogLessDir[]> {
    this.#assertOpen()
    return findLogLessDirs(this.root, this.#reader.codec.logFileName, signal)
  }

  /** Waits for the operations already called, then releases every writer (lock and log); the front closes the journal after. */
  async close(): Promise<void> {
    this.#closed = true
    await this.#writers.close()
  }

  #assertOpen(): void {
    if (this.#closed) throw closedError(this.root)
  }

  #assertReadable(id: SessionId): void {
    this.#assertOpen()
    assertStorableId(id)
  }

  #assertWritable(): void {
    this.#assertOpen()
    if (this.readOnly) {
      throw persistenceError(
        'SESSION_PERSISTENCE_READ_ONLY',
        `This persistence backend was opened read-only over ${this.root}; open it without readOnly to write (append, load with repair, delete).`,
      )
    }
  }
}
