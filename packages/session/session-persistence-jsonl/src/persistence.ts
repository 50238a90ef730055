import { constants, promises as fsp, fstatSync, type Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { isAbsolute, join, resolve } from 'node:path'
import { crc32 } from 'node:zlib'
import { throwIfAborted } from '@dsh/context'
import { type SessionId, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import type {
  AppendResult,
  AppendTarget,
  LoadedSession,
  PersistedSessionRecord,
  PersistenceMetrics,
  SessionChangeCursor,
  SessionChanges,
  SessionObservation,
  SessionPersistence,
  SessionRevision,
  SessionSuffixObservation,
} from '@dsh/session-persistence'
import { persistenceCancelled as cancelled, checkAppend, interruptedTurnEnds, SessionPersistenceError } from '@dsh/session-persistence'
import { createCodec, type JsonlCompression, type LogCodec } from './codec.js'
import { JsonlPersistenceError, persistenceError } from './errors.js'
import { fsyncDir, fsyncFd, isErrno, publishNew, readAt, revisionOf, writevAt } from './fs-io.js'
import { assertStorableId, decodeSessionDirName, encodeSessionDirName, isSessionDirName } from './id-encoding.js'
import { encodeEventLines, encodeHeaderLine, type PhysicalHeader } from './log-format.js'
import { corrupt, decodeEvents, decodeHeader, type LogScan, type LogUnit, locateHeader, scanLog } from './log-scan.js'
import { encodeUnit, encodeUnitParts } from './log-units.js'
import { openRoot } from './root-marker.js'
import { WriterLock } from './writer-lock.js'

export interface JsonlPersistenceOptions {
  /** The root directory; created if missing. One root holds one encoding. */
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
}

/** The embedded default backend, plus where it keeps things. */
export interface JsonlPersistence extends SessionPersistence {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  /** The log file of `id` (whether or not it exists). */
  logPath(id: string): string
  /** Reads and checks one log in full, reporting its torn tail (bytes `load` would truncate). */
  verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification>
  /** Logs the last `list()` left out because their header unit is damaged or of an unsupported version. */
  damagedLogs(): readonly DamagedLog[]
}

export interface LogVerification {
  readonly id: SessionId
  readonly events: number
  /** Bytes of the committed log (header unit and every committed batch). */
  readonly committedBytes: number
  /** Bytes after the committed log: an incomplete final batch that reads ignore. */
  readonly tornBytes: number
}

/** A session directory whose log header could not be read. */
export interface DamagedLog {
  readonly dir: string
  /** The session id the directory name encodes; `{ hashed: true }` for long ids (stored only in the header). */
  readonly id: string | { readonly hashed: true } | undefined
  readonly code: 'SESSION_PERSISTENCE_CORRUPT' | 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION'
  readonly message: string
}

/** What a resumed or appended-to session needs between appends: the held lock, the open log and where it ends. */
interface Writer {
  readonly id: string
  readonly label: string
  readonly dir: string
  readonly file: string
  readonly lock: WriterLock
  readonly handle: FileHandle
  readonly physical: PhysicalHeader
  /** CRC of the header line: the lifecycle part of every revision. */
  readonly headerCrc: number
  committedEnd: number
  nextSeq: number
  /** The log's current revision; only this writer changes the file while it holds the lock. */
  revision: SessionRevision
}

const LOCK_FILE = 'writer.lock'
/** `list` and `stat` read this much of a log first: typically the whole header unit and little else. */
const HEADER_PREFIX_BYTES = 512

/** Creates the embedded default backend over `options.root` (see the package README). */
export function createJsonlPersistence(options: JsonlPersistenceOptions): JsonlPersistence {
  return new JsonlSessionPersistence(options)
}

class JsonlSessionPersistence implements JsonlPersistence {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly #codec: LogCodec
  readonly #clock: () => number
  readonly #maxOpenWriters: number
  readonly #listConcurrency: number
  readonly #metrics: PersistenceMetrics = { headerReads: 0, bodyReads: 0, bytesRead: 0, appends: 0 }
  #damaged: readonly DamagedLog[] = []
  /** Open writers in least-recently-used order (Map iteration order). */
  readonly #writers = new Map<string, Writer>()
  /** Per-session operation chains: appends, loads and deletes of one session run one at a time. */
  readonly #chains = new Map<string, Promise<void>>()
  /** Writers queued for release because more than `maxOpenWriters` are open. */
  readonly #evicting = new Set<string>()
  #closed = false

  constructor(options: JsonlPersistenceOptions) {
    if (typeof options.root !== 'string' || options.root.length === 0) {
      throw new JsonlPersistenceError('JSONL_PERSISTENCE_INVALID_OPTIONS', 'createJsonlPersistence needs a root directory path.')
    }
    const requested = options.compression
    if (requested !== undefined && requested !== 'zstd' && requested !== 'none') {
      throw new JsonlPersistenceError(
        'JSONL_PERSISTENCE_INVALID_OPTIONS',
        `compression must be 'zstd' or 'none', got ${JSON.stringify(requested)}.`,
      )
    }
    this.root = isAbsolute(options.root) ? options.root : resolve(options.root)
    this.readOnly = options.readOnly === true
    this.#clock = options.clock ?? Date.now
    this.#maxOpenWriters = Math.max(1, options.maxOpenWriters ?? 256)
    this.#listConcurrency = Math.max(1, options.listConcurrency ?? 16)
    this.compression = openRoot(this.root, requested ?? (this.readOnly ? undefined : 'zstd'), this.readOnly)
    this.#codec = createCodec(this.compression)
  }

  get metrics(): Readonly<PersistenceMetrics> {
    return this.#metrics
  }

  logPath(id: string): string {
    return join(this.root, encodeSessionDirName(id), this.#codec.logFileName)
  }
  damagedLogs(): readonly DamagedLog[] {
    return this.#damaged
  }

  // ---------------------------------------------------------------- writes

  append(target: AppendTarget, events: readonly StoredSessionEvent[]): Promise<AppendResult> {
    try {
      this.#assertWritable()
      assertStorableId(target?.header?.id)
      SessionLogOffset(target.inheritedEventCount)
      if (!Array.isArray(events)) throw persistenceError('SESSION_PERSISTENCE_INVALID_EVENT', 'append needs an array of events.')
    } catch (error) {
      return Promise.reject(error as Error)
    }
    const id = target.header.id
    return this.#serial(id, async () => {
      let writer = this.#writers.get(id)
      if (writer === undefined) {
        const opened = await this.#openWriter(id, 'create')
        if (opened.kind === 'absent') return this.#create(opened.dir, opened.lock, target, events)
        if (opened.kind === 'missing') throw notFound(id)
        writer = opened.writer
      }
      checkAppend(target, events, {
        header: writer.physical.header,
        inheritedEventCount: writer.physical.inheritedEventCount,
        nextSeq: writer.nextSeq,
      })
      if (events.length > 0) await this.#writeBatch(writer, events)
      return { revision: this.#revisionOfWriter(writer), nextSeq: writer.nextSeq as SessionLogOffset }
    })
  }

  /** First append: header and first batch published together, atomically. */
  async #create(dir: string, lock: WriterLock, target: AppendTarget, events: readonly StoredSessionEvent[]): Promise<AppendResult> {
    const id = target.header.id
    const label = labelOf(id)
    try {
      checkAppend(target, events, undefined)
      const physical: PhysicalHeader = { header: target.header, inheritedEventCount: target.inheritedEventCount }
      const headerLine = encodeHeaderLine(physical)
      const parts = [await encodeUnit(this.#codec, headerLine, 'header', 0, 0)]
      if (events.length > 0) parts.push(await encodeUnit(this.#codec, encodeEventLines(events), 'batch', 0, events.length))
      const data = Buffer.concat(parts)
      const file = join(dir, this.#codec.logFileName)
      if (!(await publishNew(file, data))) {
        throw persistenceError('SESSION_PERSISTENCE_CONFLICT', `Session ${label} was created by another writer meanwhile.`, {
          details: { id },
        })
      }
      const handle = await fsp.open(file, constants.O_RDWR)
      const headerCrc = crc32(headerLine)
      const revision = revisionOf(headerCrc, await handle.stat())
      const writer: Writer = {
        id,
        label,
        dir,
        file,
        lock,
        handle,
        physical,
        headerCrc,
        committedEnd: data.length,
        nextSeq: events.length,
        revision,
      }
      this.#remember(writer)
      if (events.length > 0) this.#metrics.appends++
      return { revision: this.#revisionOfWriter(writer), nextSeq: events.length as SessionLogOffset }
    } catch (error) {
      if (!this.#writers.has(id)) {
        // A rejected first append leaves nothing behind, not even the directory.
        await lock.release()
        await this.#removeDir(dir)
      }
      throw error
    }
  }

  /** Durable append: write + fsync; on failure the file is truncated back to its committed end and the error rethrown. */
  async #writeBatch(writer: Writer, events: readonly StoredSessionEvent[]): Promise<void> {
    await writer.lock.verify(writer.label)
    const parts = await encodeUnitParts(this.#codec, encodeEventLines(events), 'batch', writer.nextSeq, events.length)
    const fd = writer.handle.fd
    let stats: Stats
    try {
      await writevAt(fd, parts, writer.committedEnd)
      await fsyncFd(fd)
      // A synchronous fstat of an open, just-synced file is a cheap system call
      // (the inode is in memory); an asynchronous one costs a round trip.
      stats = fstatSync(fd)
    } catch (error) {
      try {
        await writer.handle.truncate(writer.committedEnd)
        await writer.handle.sync()
      } catch {
        // The file may now hold part of the batch: forget this writer so the
        // next operation rescans (and truncates) the log from disk.
        await this.#dropWriter(writer)
      }
      throw persistenceError(
        'SESSION_PERSISTENCE_IO',
        `Appending to session ${writer.label} failed (${(error as Error).message}); nothing of the batch was committed.`,
        { cause: error, details: { id: writer.id } },
      )
    }
    writer.committedEnd += parts[0].length + parts[1].length
    writer.nextSeq += events.length
    writer.revision = revisionOf(writer.headerCrc, stats)
    this.#metrics.appends++
  }

  /**
   * Takes the session's lock and opens its log for appending. A torn tail
   * left by a crashed writer is truncated here (nothing committed is
   * touched), so appends always continue a committed log.
   */
  async #openWriter(
    id: string,
    mode: 'create' | 'existing',
  ): Promise<
    | { kind: 'writer'; writer: Writer; truncated: boolean; buf: Buffer; scan: LogScan }
    | { kind: 'absent'; dir: string; lock: WriterLock }
    | { kind: 'missing' }
  > {
    const label = labelOf(id)
    const dir = join(this.root, encodeSessionDirName(id))
    let lock: WriterLock | undefined
    for (let attempt = 0; lock === undefined; attempt++) {
      if (mode === 'create') {
        try {
          await fsp.mkdir(dir, { mode: 0o700 })
          await fsyncDir(this.root)
        } catch (error) {
          if (!isErrno(error, 'EEXIST')) throw ioError(`create the directory of session ${label}`, error)
        }
      }
      try {
        lock = await WriterLock.acquire(join(dir, LOCK_FILE), label)
      } catch (error) {
        // The directory vanished (a concurrent delete): recreate it, or report absence.
        if (!isErrno(error, 'ENOENT')) throw error
        if (mode === 'existing') return { kind: 'missing' }
        if (attempt > 8) throw ioError(`lock session ${label}`, error)
      }
    }
    const file = join(dir, this.#codec.logFileName)
    let handle: FileHandle
    try {
      handle = await fsp.open(file, constants.O_RDWR)
    } catch (error) {
      if (isErrno(error, 'ENOENT')) {
        if (mode === 'create') return { kind: 'absent', dir, lock }
        await lock.release()
        return { kind: 'missing' }
      }
      await lock.release()
      throw ioError(`open the log of session ${label}`, error)
    }
    try {
      // The whole log is read and its structure checked (lengths, seqs, CRC32 of
      // every stored unit; no decompression), so appends never extend a damaged
      // log and always continue exactly at the committed end.
      const size = (await handle.stat()).size
      const buf = await this.#countedRead(handle, 0, size)
      this.#metrics.bodyReads++
      const scan = await scanLog(buf, this.#codec, file)
      const physical = await decodeHeader(buf, scan.header, this.#codec, file)
      if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
      let truncated = false
      if (scan.committedEnd < size) {
        // A torn tail left by a crashed writer: never committed, so removing it loses nothing.
        await handle.truncate(scan.committedEnd)
        await handle.sync()
        truncated = true
      }
      const headerCrc = scan.header.trailer.plainCrc
      const revision = revisionOf(headerCrc, await handle.stat())
      const writer: Writer = {
        id,
        label,
        dir,
        file,
        lock,
        handle,
        physical,
        headerCrc,
        committedEnd: scan.committedEnd,
        nextSeq: scan.nextSeq,
        revision,
      }
      this.#remember(writer)
      return { kind: 'writer', writer, truncated, buf: buf.subarray(0, scan.committedEnd), scan }
    } catch (error) {
      await handle.close()
      await lock.release()
      throw error
    }
  }

  #remember(writer: Writer): void {
    this.#writers.delete(writer.id)
    this.#writers.set(writer.id, writer)
    let excess = this.#writers.size - this.#evicting.size - this.#maxOpenWriters
    for (const [otherId, other] of this.#writers) {
      if (excess <= 0) break
      if (otherId === writer.id || this.#evicting.has(otherId)) continue
      // Released through the session's own chain, after anything already queued on it.
      this.#evicting.add(otherId)
      excess--
      void this.#serial(otherId, () => this.#dropWriter(other)).catch(() => {})
    }
  }

  async #dropWriter(writer: Writer): Promise<void> {
    if (this.#writers.get(writer.id) === writer) this.#writers.delete(writer.id)
    this.#evicting.delete(writer.id)
    try {
      await writer.handle.close()
    } finally {
      await writer.lock.release()
    }
  }

  /**
   * Commits crash repair and returns the log: a torn tail is truncated and
   * every turn left open gets a durable `turn/end {reason:'interrupted'}`.
   * The session's writer lock stays held for the resumed session's appends.
   */
  load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    try {
      this.#assertWritable()
      assertStorableId(id)
      throwIfAborted(signal, cancelled)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#serial(id, async () => {
      let writer = this.#writers.get(id)
      let repaired = false
      let read: { buf: Buffer; scan: LogScan } | undefined
      if (writer === undefined) {
        const opened = await this.#openWriter(id, 'existing')
        if (opened.kind !== 'writer') throw notFound(id)
        writer = opened.writer
        repaired = opened.truncated
        read = { buf: opened.buf, scan: opened.scan }
      }
      let events: StoredSessionEvent[]
      try {
        throwIfAborted(signal, cancelled)
        if (read === undefined) {
          const buf = await this.#countedRead(writer.handle, 0, writer.committedEnd)
          this.#metrics.bodyReads++
          read = { buf, scan: await scanLog(buf, this.#codec, writer.file) }
        }
        events = await decodeEvents(read.buf, read.scan, this.#codec, writer.file, () => throwIfAborted(signal, cancelled))
      } catch (error) {
        // Do not keep a damaged (or unwanted) session locked.
        await this.#dropWriter(writer)
        throw error
      }
      const repairs = interruptedTurnEnds(events, this.#clock())
      if (repairs.length > 0) {
        await this.#writeBatch(writer, repairs)
        events.push(...repairs)
        repaired = true
      }
      const revision = this.#revisionOfWriter(writer)
      throwIfAborted(signal, cancelled)
      return Object.freeze({
        header: writer.physical.header,
        inheritedEventCount: writer.physical.inheritedEventCount,
        events: Object.freeze(events),
        revision,
        repaired,
      })
    })
  }

  delete(id: SessionId): Promise<boolean> {
    try {
      this.#assertWritable()
      assertStorableId(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#serial(id, async () => {
      let writer = this.#writers.get(id)
      let dir: string
      let lock: WriterLock
      let existed: boolean
      if (writer !== undefined) {
        ;({ dir, lock } = writer)
        existed = true
      } else {
        const opened = await this.#openWriter(id, 'existing').catch((error: unknown) => {
          // A log too damaged to open can still be deleted explicitly.
          if (error instanceof Error && (error as { code?: string }).code === 'SESSION_PERSISTENCE_CORRUPT') return 'corrupt' as const
          throw error
        })
        if (opened === 'corrupt') return this.#deleteDamaged(id)
        // 'existing' mode reports a directory without a log as missing (its lock already released).
        if (opened.kind !== 'writer') return false
        writer = opened.writer
        ;({ dir, lock } = writer)
        existed = true
      }
      this.#writers.delete(id)
      await writer.handle.close()
      try {
        await fsp.unlink(writer.file)
        await fsyncDir(dir)
      } catch (error) {
        if (!isErrno(error, 'ENOENT')) {
          await lock.release()
          throw ioError(`delete session ${writer.label}`, error)
        }
        existed = false
      }
      await lock.release()
      await this.#removeDir(dir)
      return existed
    })
  }

  /** Deletes a log that cannot even be opened for writing (damaged header). */
  async #deleteDamaged(id: string): Promise<boolean> {
    const dir = join(this.root, encodeSessionDirName(id))
    const lock = await WriterLock.acquire(join(dir, LOCK_FILE), labelOf(id))
    try {
      await fsp.unlink(join(dir, this.#codec.logFileName))
      await fsyncDir(dir)
    } finally {
      await lock.release()
    }
    await this.#removeDir(dir)
    return true
  }

  async #removeDir(dir: string): Promise<void> {
    try {
      for (const name of await fsp.readdir(dir)) {
        // Leftover temporary files of crashed writers; a lock taken meanwhile stays (and keeps the directory).
        if (name.startsWith('.') && name.includes('.tmp-')) await fsp.unlink(join(dir, name)).catch(() => {})
      }
      await fsp.rmdir(dir)
      await fsyncDir(this.root)
    } catch (error) {
      if (!isErrno(error, 'ENOENT', 'ENOTEMPTY', 'EEXIST')) throw ioError(`remove ${dir}`, error)
    }
  }

  // ----------------------------------------------------------------- reads

  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    return (await this.#readLog(id, signal)).observation
  }

  /**
   * Reads and checks one whole log like `inspect`, and also says how many
   * bytes of torn tail follow the committed batches (what `load` would
   * truncate). For `dsh verify`; never mutates storage.
   */
  async verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification> {
    const { observation, committedEnd, size } = await this.#readLog(id, signal)
    return Object.freeze({ id, events: observation.events.length, committedBytes: committedEnd, tornBytes: size - committedEnd })
  }

  async #readLog(
    id: SessionId,
    signal: AbortSignal | undefined,
  ): Promise<{ observation: SessionObservation; committedEnd: number; size: number }> {
    this.#assertOpen()
    assertStorableId(id)
    throwIfAborted(signal, cancelled)
    const file = this.logPath(id)
    const handle = await openForRead(file)
    if (handle === undefined) throw notFound(id)
    let buf: Buffer
    let stats: Stats
    try {
      // A concurrent truncation (crash repair by another process) can make the
      // read come up short; read again from a fresh size.
      for (let attempt = 0; ; attempt++) {
        stats = await handle.stat()
        const size = Number(stats.size)
        buf = await this.#countedRead(handle, 0, size)
        if (buf.length === size || attempt >= 3) break
      }
    } finally {
      await handle.close()
    }
    this.#metrics.bodyReads++
    throwIfAborted(signal, cancelled)
    const scan: LogScan = await scanLog(buf, this.#codec, file)
    const physical = await decodeHeader(buf, scan.header, this.#codec, file)
    if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
    const events = await decodeEvents(buf, scan, this.#codec, file, () => throwIfAborted(signal, cancelled))
    throwIfAborted(signal, cancelled)
    const revision = revisionOf(scan.header.trailer.plainCrc, stats)
    const observation = Object.freeze({
      header: physical.header,
      inheritedEventCount: physical.inheritedEventCount,
      events: Object.freeze(events),
      revision,
    })
    return { observation, committedEnd: scan.committedEnd, size: buf.length }
  }

  async inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    const observation = await this.inspect(id, signal)
    return Object.freeze({ ...observation, from, events: Object.freeze(observation.events.slice(from)) })
  }

  async changes(_since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    this.#assertOpen()
    throwIfAborted(signal, cancelled)
    // Not yet a journal: every call asks for a rescan (correct, never incremental).
    return Object.freeze({ ids: Object.freeze([]), cursor: '', rescan: true })
  }

  /** The revision, from the log's header unit (its CRC) and file metadata; no body is read. */
  async stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    this.#assertOpen()
    assertStorableId(id)
    throwIfAborted(signal, cancelled)
    const file = this.logPath(id)
    const handle = await openForRead(file)
    if (handle === undefined) return undefined
    try {
      const stats = await handle.stat()
      const { unit } = await this.#readHeaderUnit(handle, Number(stats.size), file)
      throwIfAborted(signal, cancelled)
      return revisionOf(unit.trailer.plainCrc, stats)
    } finally {
      await handle.close()
    }
  }

  /** Header-only records of every persisted session: reads each log's header unit and nothing else. */
  async list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    this.#assertOpen()
    throwIfAborted(signal, cancelled)
    let entries
    try {
      entries = await fsp.readdir(this.root, { withFileTypes: true })
    } catch (error) {
      throw ioError(`read the root ${this.root}`, error)
    }
    const names = entries.filter((e) => e.isDirectory() && isSessionDirName(e.name)).map((e) => e.name)
    const records: PersistedSessionRecord[] = []
    const damaged: DamagedLog[] = []
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < names.length) {
        throwIfAborted(signal, cancelled)
        const name = names[next++]!
        try {
          const record = await this.#readRecord(name)
          if (record !== undefined) records.push(record)
        } catch (error) {
          // One log whose header cannot be read must not hide every other
          // session: it is left out of the listing and reported through
          // `damagedLogs()` (and `dsh verify`), never dropped silently.
          if (
            !(error instanceof SessionPersistenceError) ||
            (error.code !== 'SESSION_PERSISTENCE_CORRUPT' && error.code !== 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION')
          )
            throw error
          damaged.push(
            Object.freeze({ dir: join(this.root, name), id: decodeSessionDirName(name), code: error.code, message: error.message }),
          )
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#listConcurrency, names.length) }, worker))
    throwIfAborted(signal, cancelled)
    this.#damaged = Object.freeze(damaged.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0)))
    return records.sort((a, b) => (a.header.id < b.header.id ? -1 : a.header.id > b.header.id ? 1 : 0))
  }

  async #readRecord(name: string): Promise<PersistedSessionRecord | undefined> {
    const file = join(this.root, name, this.#codec.logFileName)
    // A directory without a published log is a creation that never completed (or a delete in progress): not persisted.
    const handle = await openForRead(file)
    if (handle === undefined) return undefined
    try {
      const stats = await handle.stat()
      const { buf, unit } = await this.#readHeaderUnit(handle, Number(stats.size), file)
      const physical = await decodeHeader(buf, unit, this.#codec, file)
      if (encodeSessionDirName(physical.header.id) !== name) {
        throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}, which is not stored in this directory`)
      }
      return Object.freeze({
        header: physical.header,
        inheritedEventCount: physical.inheritedEventCount,
        revision: revisionOf(unit.trailer.plainCrc, stats),
      })
    } finally {
      await handle.close()
    }
  }

  /** Reads a bounded prefix holding the header unit (growing it only for an unusually large header). */
  async #readHeaderUnit(handle: FileHandle, size: number, file: string): Promise<{ buf: Buffer; unit: LogUnit }> {
    this.#metrics.headerReads++
    let length = Math.min(size, HEADER_PREFIX_BYTES)
    for (;;) {
      const buf = await this.#countedRead(handle, 0, length)
      const unit = locateHeader(buf, this.#codec, file, buf.length >= size)
      if (unit !== 'more') return { buf, unit }
      length = Math.min(size, length * 4)
    }
  }

  #revisionOfWriter(writer: Writer): SessionRevision {
    return writer.revision
  }

  async #countedRead(handle: FileHandle, position: number, length: number): Promise<Buffer> {
    const buf = await readAt(handle, position, length)
    this.#metrics.bytesRead += buf.length
    return buf
  }

  // ------------------------------------------------------------- lifecycle

  async close(): Promise<void> {
    this.#closed = true
    while (this.#chains.size > 0) await Promise.all(this.#chains.values())
    const writers = [...this.#writers.values()]
    this.#writers.clear()
    const results = await Promise.allSettled(
      writers.map(async (w) => {
        try {
          await w.handle.close()
        } finally {
          await w.lock.release()
        }
      }),
    )
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw ioError('close session logs', (failed as PromiseRejectedResult).reason)
  }

  #assertOpen(): void {
    if (this.#closed)
      throw persistenceError('SESSION_PERSISTENCE_CLOSED', `This persistence backend (${this.root}) has been closed; create a new one.`)
  }

  #assertWritable(): void {
    this.#assertOpen()
    if (this.readOnly)
      throw persistenceError(
        'SESSION_PERSISTENCE_READ_ONLY',
        `This persistence backend was opened read-only over ${this.root}; open it without readOnly to write (append, load with repair, delete).`,
      )
  }

  #serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(id) ?? Promise.resolve()
    const result = previous.then(operation)
    const tail = result.then(
      () => {},
      () => {},
    )
    this.#chains.set(id, tail)
    void tail.then(() => {
      if (this.#chains.get(id) === tail) this.#chains.delete(id)
    })
    return result
  }
}

async function openForRead(file: string): Promise<FileHandle | undefined> {
  try {
    return await fsp.open(file, constants.O_RDONLY)
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    throw ioError(`open ${file}`, error)
  }
}

function notFound(id: string): Error {
  return persistenceError('SESSION_PERSISTENCE_NOT_FOUND', `Session ${labelOf(id)} is not persisted here.`, { details: { id } })
}

function ioError(what: string, cause: unknown): Error {
  return persistenceError('SESSION_PERSISTENCE_IO', `Could not ${what}: ${(cause as Error)?.message ?? String(cause)}.`, { cause })
}

/** A short, printable form of an id for messages. */
function labelOf(id: string): string {
  const text = JSON.stringify(id)
  return text.length > 80 ? `${text.slice(0, 77)}…"` : text
}
