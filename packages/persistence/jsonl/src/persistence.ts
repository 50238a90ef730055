import { constants, fdatasyncSync, promises as fsp, fstatSync, lstatSync, mkdirSync, type Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { throwIfAborted } from '@dsh/context'
import { type SessionId, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import type {
  AppendResult,
  AppendTarget,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  PersistenceMetrics,
  SessionObservation,
  SessionPersistence,
  SessionRevision,
  SessionSuffixObservation,
} from '@dsh/session-persistence'
import {
  type AppendedEvent,
  appendedEventCount,
  persistenceCancelled as cancelled,
  checkAppend,
  expandEventRuns,
  interruptedTurnEnds,
  isEventRun,
  SessionPersistenceError,
} from '@dsh/session-persistence/backend'
import { encodeBatchUnit } from './bulk-append.js'
import type { JournalWriter } from './change-journal.js'
import { createCodec, type JsonlCompression, type LogCodec } from './codec.js'
import { closedError, ioError, labelOf, notFound, persistenceError } from './errors.js'
import { assertReferenceableSync, type ForkIo, locateCutSync, registerDependantSync } from './fork-refs.js'
import {
  fdatasyncFd,
  fsyncDir,
  isErrno,
  isLiveTemp,
  paddedRevisionOf,
  publishNew,
  revisionOf,
  SYNC_WRITE_MAX,
  tempSibling,
  writeAt,
  writevAt,
  writevAtSync,
} from './fs-io.js'
import { assertStorableId, decodeSessionDirName, encodeSessionDirName, isSessionDirName } from './id-encoding.js'
import { encodeHeaderLine, type ForkReference, newLogId, type PhysicalHeader, packsLog } from './log-format.js'
import { type PaddedWrite, padsLog, planPaddedAppend, planSettledSlot, trailerCheckOf } from './log-padding.js'
import { LogReader, MAX_FORK_DEPTH, type OwnRead } from './log-reader.js'
import { corrupt, decodeHeader, scanLog } from './log-scan.js'
import { encodeUnit } from './log-units.js'
import { liveHolder, WriterLock } from './writer-lock.js'

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
}

/** The metrics of this backend: the contract's, all kept. */
export interface JsonlPersistenceMetrics extends PersistenceMetrics {
  rescans: number
  logOpens: number
  /** Appends by a fresh writer that verified only the log's tail (header, last batch and trailer). */
  tailVerifications: number
  /** Batches synced on the calling thread (a lone small batch); the others synced on the thread pool. */
  inlineSyncs: number
}

/** The embedded default backend, plus where it keeps things. */
export interface JsonlPersistence extends SessionPersistence {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly metrics: Readonly<JsonlPersistenceMetrics>
  /** The log file of `id` (whether or not it exists). */
  logPath(id: string): string
  /** Reads and checks one log in full (a fork's inherited prefix included), reporting its torn tail (bytes `load` would truncate). */
  verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification>
  /** Checks the root's change journal: whether a reader without a cursor could follow it, or why it must rescan. */
  verifyChangeJournal(): Promise<ChangeJournalVerification>
  /** Logs the last `list()` left out because their header unit is damaged or of an unsupported version. */
  damagedLogs(): readonly DamagedLog[]
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

/** A batch encoded for a log, waiting to be written (`#writeBatch`). */
interface EncodedBatch {
  /** Its first event's envelope (what is checked against the log in turn when it was encoded early: `#appendEncoded`). */
  readonly first: StoredSessionEvent
  readonly count: number
  /** Whether runs were packed (the log's version decides: `packsLog`). */
  readonly packed: boolean
  readonly unit: ReturnType<typeof encodeBatchUnit>
}

/** What a resumed or appended-to session needs between appends: the held lock, the open log and where it ends. */
interface Writer {
  readonly id: string
  readonly label: string
  readonly dir: string
  readonly file: string
  readonly lock: WriterLock
  handle: FileHandle
  physical: PhysicalHeader
  /** CRC of the header line: the lifecycle part of every revision. */
  headerCrc: number
  /** Where the header unit ends (the first batch starts). */
  headerEnd: number
  committedEnd: number
  /** The file's size: `committedEnd`, or beyond it when the log ends with padding (`log-padding.ts`). */
  fileEnd: number
  /** The newest end slot's generation (0 without padding). */
  generation: number
  /** The end the newest slot names (`committedEnd` without padding): a slot is written again past `checkpointDistance` from it. */
  checkpoint: number
  /** The last batch trailer's CRC field (what a slot at the committed end records; 0 while the log has no padding). */
  trailerCheck: number
  /** The log file's inode (part of the revision: a padded append computes it without a `stat`). */
  ino: number
  nextSeq: number
  /** The log's current revision; only this writer changes the file while it holds the lock. */
  revision: SessionRevision
}

const LOCK_FILE = 'writer.lock'
/** Dependants (forks stored by reference) register here, one file per child, before their log is published. */
const REFS_DIR = 'refs'
/** Present while a delete of the session is deciding; a fork does not reference a session being deleted. */
const DELETING_FILE = 'deleting'

/**
 * What the backend's front (`create.ts`) has opened before this module is
 * loaded: the root (its marker read or created), its change journal and the
 * metrics both sides count into.
 */
export interface OpenedRoot {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly metrics: JsonlPersistenceMetrics
  /** The journal writer of a writable backend (the front closes it after `close()`). */
  readonly journal: JournalWriter | undefined
}

/** Every operation that touches a log; the change feed and the journal's check stay with the front. */
export type LogBackend = Omit<JsonlPersistence, 'changes' | 'verifyChangeJournal'>

/** The log side of the embedded default backend, loaded by `createJsonlPersistence`'s front at its first operation on a log. */
export function openLogBackend(options: JsonlPersistenceOptions, opened: OpenedRoot): LogBackend {
  return new JsonlSessionPersistence(options, opened)
}

class JsonlSessionPersistence implements LogBackend {
  readonly root: string
  readonly compression: JsonlCompression
  readonly readOnly: boolean
  readonly #codec: LogCodec
  readonly #clock: () => number
  readonly #maxOpenWriters: number
  readonly #listConcurrency: number
  readonly #metrics: JsonlPersistenceMetrics
  /** Batches being written now (any session): a batch syncs inline only when it is the only one. */
  #batchesInFlight = 0
  /** Appends begin/end records around every change of a log (writable instances). */
  readonly #journal: JournalWriter | undefined
  /** Every read of the root's logs (see `log-reader.ts`). */
  readonly #reader: LogReader
  #damaged: readonly DamagedLog[] = []
  /** Open writers in least-recently-used order (Map iteration order). */
  readonly #writers = new Map<string, Writer>()
  /** Per-session operation chains: appends, loads and deletes of one session run one at a time. */
  readonly #chains = new Map<string, Promise<void>>()
  /** Operations of each session queued or running on its chain (absent: none). */
  readonly #queued = new Map<string, number>()
  /** An append was written on its caller's turn (`#appendNow`) and the microtasks have not run since. */
  #appendedNow = false
  readonly #turnEnded = (): void => {
    this.#appendedNow = false
  }
  /** Writers queued for release because more than `maxOpenWriters` are open. */
  readonly #evicting = new Set<string>()
  #closed = false

  constructor(options: JsonlPersistenceOptions, opened: OpenedRoot) {
    this.root = opened.root
    this.compression = opened.compression
    this.readOnly = opened.readOnly
    this.#metrics = opened.metrics
    this.#journal = opened.journal
    this.#clock = options.clock ?? Date.now
    this.#maxOpenWriters = Math.max(1, options.maxOpenWriters ?? 256)
    this.#listConcurrency = Math.max(1, options.listConcurrency ?? 16)
    this.#codec = createCodec(this.compression)
    this.#reader = new LogReader(this.root, this.#codec, this.#metrics)
  }

  /** What the synchronous fork helpers need (see `fork-refs.ts`). */
  get #forkIo(): ForkIo {
    return {
      root: this.root,
      codec: this.#codec,
      logPath: (id) => this.logPath(id),
      live: (id) => {
        const w = this.#writers.get(id)
        return w === undefined
          ? undefined
          : { fd: w.handle.fd, physical: w.physical, headerEnd: w.headerEnd, committedEnd: w.committedEnd, nextSeq: w.nextSeq }
      },
      opened: () => {
        this.#metrics.logOpens++
      },
      counted: (bytes, header) => {
        this.#metrics.bytesRead += bytes
        if (header) this.#metrics.headerReads++
      },
    }
  }

  get metrics(): Readonly<JsonlPersistenceMetrics> {
    return this.#metrics
  }

  logPath(id: string): string {
    return join(this.root, encodeSessionDirName(id), this.#codec.logFileName)
  }

  damagedLogs(): readonly DamagedLog[] {
    return this.#damaged
  }

  // ---------------------------------------------------------------- writes

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
    const id = target.header.id
    const now = this.#appendNow(target, events)
    if (now !== undefined) return now
    const early = this.#encodeEarly(target, events)
    if (early !== undefined) return this.#serial(id, () => this.#appendEncoded(target, early))
    return this.#serial(id, () => this.#appendInTurn(target, events))
  }

  /**
   * In turn: the batch checked against the log and encoded. The write's
   * promise is returned, not awaited, so the events are not kept alive while
   * the batch is compressed, written and synced.
   */
  async #appendInTurn(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    const id = target.header.id
    let writer = this.#writers.get(id)
    if (writer === undefined) {
      const opened = await this.#openWriter(id, 'create')
      if (opened.kind === 'absent') return this.#create(opened.dir, opened.lock, target, events, opened.rootSync)
      if (opened.kind === 'missing') throw notFound(id)
      writer = opened.writer
    }
    checkAppend(target, events, {
      header: writer.physical.header,
      inheritedEventCount: writer.physical.inheritedEventCount,
      nextSeq: writer.nextSeq,
    })
    if (events.length === 0) return { revision: writer.revision, nextSeq: writer.nextSeq as SessionLogOffset }
    return this.#appendWritten(writer, this.#encode(writer, events))
  }

  /**
   * A small batch continuing an idle session whose padded log is open is
   * written and synced on the caller's turn, before `append` returns: no
   * queue turn and no await. A durable 1 KiB append takes ~200 µs, most of it
   * the sync, and the caches are cold after it; the queued path's promise
   * hops and second check cost it microseconds (`bench append-sqlite`).
   * Taken only when nothing of this session is queued or running, no batch
   * of any session is being written, the writer lock needs no check, the
   * batch is encoded synchronously and fits the padding in a small write —
   * and no other append was taken here since the microtasks last ran: when
   * a caller appends to several sessions at once, the first syncs here
   * (it cannot know the others come) and the rest go to the queue, where
   * their syncs overlap on the thread pool (`#writeBatchNow`). Otherwise
   * `undefined`, nothing done. A batch that fails a check is left to the
   * queued path too, so every refusal is the queued path's, in turn. What it
   * writes, syncs and records is `#writeBatchNow`'s, between the same
   * journal records.
   */
  #appendNow(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> | undefined {
    const id = target.header.id
    const writer = this.#writers.get(id)
    if (
      writer === undefined ||
      events.length === 0 ||
      this.#appendedNow ||
      this.#queued.has(id) ||
      this.#batchesInFlight > 0 ||
      this.#evicting.has(id) ||
      writer.lock.verifyDue() ||
      !padsLog(this.#codec.compression, writer.physical)
    )
      return undefined
    let batch: EncodedBatch
    try {
      checkAppend(target, events, {
        header: writer.physical.header,
        inheritedEventCount: writer.physical.inheritedEventCount,
        nextSeq: writer.nextSeq,
      })
      batch = this.#encode(writer, events)
    } catch {
      return undefined
    }
    const parts = batch.unit
    const padded = Array.isArray(parts) ? planPaddedAppend(writer, parts[0], parts[1], writer.nextSeq + batch.count) : undefined
    if (!Array.isArray(parts) || padded === undefined || padded.bytes > SYNC_WRITE_MAX) {
      // Compressed on the pool, or a large growth: written as any queued batch, already encoded.
      if (!Array.isArray(parts)) parts.catch(() => {})
      return this.#serial(id, () => this.#appendEncoded(target, batch))
    }
    let op: string | undefined
    try {
      op = this.#beginChange(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    this.#appendedNow = true
    queueMicrotask(this.#turnEnded)
    try {
      for (const [at, bytes] of padded.writes) writevAtSync(writer.handle.fd, bytes, at)
      fdatasyncSync(writer.handle.fd)
    } catch (error) {
      // Undone in turn, before anything else of the session runs, within the change's journal records.
      return this.#serial(id, () => this.#appendFailed(writer, error as Error).finally(() => this.#endChange(id, op)))
    }
    this.#endChange(id, op)
    this.#metrics.inlineSyncs++
    this.#committed(writer, parts, batch.count, padded, undefined)
    return Promise.resolve({ revision: writer.revision, nextSeq: writer.nextSeq as SessionLogOffset })
  }

  async #appendWritten(writer: Writer, batch: EncodedBatch): Promise<AppendResult> {
    await this.#writeBatch(writer, batch)
    return { revision: writer.revision, nextSeq: writer.nextSeq as SessionLogOffset }
  }

  /**
   * A batch that continues a session whose log is open, and is not written
   * at once (`#appendNow`: an earlier append of it is still being written
   * and synced, say), is checked and encoded now, on the caller's turn: its
   * lines are serialised here and its body compressed
   * on the pool while the earlier batch waits for its fsync, and its events
   * are not kept alive while it waits (a caller keeping two batches in
   * flight, an import, so overlaps each batch's encoding with the previous
   * one's write). Nothing of the events is read after this call, so a caller
   * changing them later changes nothing. In turn, what depends on the log —
   * the header's lifecycle, the inherited count, the first seq being the
   * log's next — is checked with the first event's envelope as it was here
   * (`#appendEncoded`). Only a batch starting past seq 0 is taken (a log
   * deleted meanwhile is then refused, never re-created from it); one that
   * fails a check here is left to the ordinary path, which throws the same
   * error in turn, in order.
   */
  #encodeEarly(target: AppendTarget, events: readonly AppendedEvent[]): EncodedBatch | undefined {
    const id = target.header.id
    const writer = this.#writers.get(id)
    const first = events[0]
    if (writer === undefined || this.#evicting.has(id) || first === undefined || !Number.isSafeInteger(first.seq) || first.seq <= 0)
      return undefined
    try {
      checkAppend(target, events, { header: target.header, inheritedEventCount: target.inheritedEventCount, nextSeq: first.seq })
      const encoded = this.#encode(writer, events)
      // Observed in turn; never an unhandled rejection meanwhile.
      if (!Array.isArray(encoded.unit)) encoded.unit.catch(() => {})
      return encoded
    } catch {
      return undefined
    }
  }

  /** In turn, a batch `#encodeEarly` checked and encoded: only what depends on the log is left to check. */
  async #appendEncoded(target: AppendTarget, batch: EncodedBatch): Promise<AppendResult> {
    const id = target.header.id
    let writer = this.#writers.get(id)
    if (writer === undefined) {
      // Dropped after an earlier batch's write failed (an eviction queued before this call is excluded there): reopened,
      // and checked as any append is. A log deleted meanwhile is not re-created from a continuation (seq > 0).
      const opened = await this.#openWriter(id, 'existing')
      if (opened.kind !== 'writer') {
        checkAppend(target, [batch.first], undefined)
        throw notFound(id)
      }
      writer = opened.writer
    }
    checkAppend(target, [batch.first], {
      header: writer.physical.header,
      inheritedEventCount: writer.physical.inheritedEventCount,
      nextSeq: writer.nextSeq,
    })
    if (packsLog(this.#codec.compression, writer.physical) !== batch.packed) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session ${writer.label} was re-created in another log format while a batch waited for its turn; nothing was appended.`,
        { details: { id } },
      )
    }
    return this.#appendWritten(writer, batch)
  }

  /** A batch's unit for `writer`'s log (packed runs or not, as the log's version says). */
  #encode(writer: Writer, items: readonly AppendedEvent[]): EncodedBatch {
    const { type, seq, time } = items[0]!
    const packed = packsLog(this.#codec.compression, writer.physical)
    // A log that packs writes a run's columns as they are; any other gets its events.
    const events = packed ? items : expandEventRuns(writer.id, items)
    const count = appendedEventCount(events)
    return {
      first: Object.freeze({ type, seq, time, data: null }),
      count,
      packed,
      unit: encodeBatchUnit(this.#codec, writer.physical, events, seq, count),
    }
  }

  /**
   * First append: header and first batch published together, atomically. With
   * `forkSource`, the log holds a reference to the source's committed prefix
   * (registered with the source first) and only the events after the cut.
   */
  async #create(
    dir: string,
    lock: WriterLock,
    target: AppendTarget,
    items: readonly AppendedEvent[],
    rootSync: Promise<void>,
  ): Promise<AppendResult> {
    const id = target.header.id
    const label = labelOf(id)
    try {
      const cut = target.inheritedEventCount
      // The batch is sliced at the cut by index (a fork by reference stores only its own events): a batch whose item at
      // cut - 1 is not the event of seq cut - 1 (a run in the seed, or a bad batch) is taken as its events, as is any batch
      // of a log that does not pack runs. Never a walk of a fork's whole seed.
      const atCut = items[cut - 1]
      const aligned = cut === 0 || (atCut !== undefined && !isEventRun(atCut) && atCut.seq === cut - 1)
      const events = aligned && packsLog(this.#codec.compression, {}) ? items : expandEventRuns(id, items)
      const byReference = target.forkSource !== undefined && target.forkSource !== id && cut > 0 && events.length >= cut
      if (byReference) {
        // The inherited prefix is not stored (the source holds it, verified on every read):
        // check only the events this log stores, as a continuation from the cut.
        checkAppend(target, events.slice(cut), { header: target.header, inheritedEventCount: cut, nextSeq: cut })
        if (events[cut - 1]?.seq !== cut - 1) checkAppend(target, events, undefined)
      } else {
        checkAppend(target, events, undefined)
      }
      let fork: ForkReference | undefined
      let registered: Promise<void> | undefined
      if (byReference && target.forkSource !== undefined) {
        fork = locateCutSync(this.#forkIo, target.forkSource, cut, MAX_FORK_DEPTH) ?? (await this.#locateCut(target.forkSource, cut, 0))
        try {
          // The registration's fsync runs concurrently with the log's write; both are durable before the log is linked.
          registered = fsyncDir(registerDependantSync(this.root, fork, id))
          registered.catch(() => {})
        } catch (error) {
          if (isErrno(error, 'ENOENT')) {
            throw persistenceError('SESSION_PERSISTENCE_CONFLICT', `The fork source ${labelOf(fork.source)} is no longer persisted.`, {
              details: { id: fork.source },
            })
          }
          throw ioError(`register fork ${label} with its source ${labelOf(fork.source)}`, error)
        }
      }
      const physical: PhysicalHeader = { header: target.header, inheritedEventCount: cut, logId: newLogId(), ...(fork ? { fork } : {}) }
      const own = fork ? events.slice(cut) : events
      const firstSeq = fork ? cut : 0
      const nextSeq = firstSeq + appendedEventCount(own)
      const headerLine = encodeHeaderLine(physical)
      const headerUnit = encodeUnit(this.#codec, headerLine, 'header', 0, 0)
      const parts = [headerUnit]
      if (own.length > 0) {
        const batch = encodeBatchUnit(this.#codec, physical, own, firstSeq, nextSeq - firstSeq)
        parts.push(...(Array.isArray(batch) ? batch : await batch))
      }
      const data = Buffer.concat(parts)
      const file = join(dir, this.#codec.logFileName)
      const published = await this.#journaled(id, async () => {
        // A source being deleted, or deleted and re-created, since it was located is not referenced.
        if (fork) assertReferenceableSync(this.#forkIo, fork, label, DELETING_FILE)
        return publishNew(file, data, Promise.all([rootSync, registered]))
      })
      if (published === undefined) {
        throw persistenceError('SESSION_PERSISTENCE_CONFLICT', `Session ${label} was created by another writer meanwhile.`, {
          details: { id },
        })
      }
      this.#metrics.logOpens++
      const handle = published
      const headerCrc = crc32(headerLine)
      // A synchronous fstat of the file just published is one cheap system call; an asynchronous one, a round trip.
      const stats = fstatSync(handle.fd)
      const revision = revisionOf(headerCrc, stats)
      const writer: Writer = {
        id,
        label,
        dir,
        file,
        lock,
        handle,
        physical,
        headerCrc,
        headerEnd: headerUnit.length,
        committedEnd: data.length,
        fileEnd: data.length,
        generation: 0,
        checkpoint: data.length,
        trailerCheck: 0,
        ino: stats.ino,
        nextSeq,
        revision,
      }
      this.#remember(writer)
      if (events.length > 0) this.#metrics.appends++
      return { revision, nextSeq: nextSeq as SessionLogOffset }
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
  async #writeBatch(writer: Writer, batch: EncodedBatch): Promise<void> {
    this.#batchesInFlight++
    try {
      await this.#writeBatchNow(writer, batch)
    } finally {
      this.#batchesInFlight--
    }
  }

  async #writeBatchNow(writer: Writer, { count, unit }: EncodedBatch): Promise<void> {
    if (writer.lock.verifyDue()) await writer.lock.verify(writer.label)
    const parts = Array.isArray(unit) ? unit : await unit
    const fd = writer.handle.fd
    // Zstd logs of version 3 on: the batch overwrites the preallocated padding (no size change, so the sync flushes data only).
    const padded = padsLog(this.#codec.compression, writer.physical)
      ? planPaddedAppend(writer, parts[0], parts[1], writer.nextSeq + count)
      : undefined
    let stats: Stats | undefined
    const op = this.#beginChange(writer.id)
    try {
      if (padded === undefined) await writevAt(fd, parts, writer.committedEnd)
      else for (const [at, bytes] of padded.writes) await writevAt(fd, bytes, at)
      // A lone small batch syncs inline (no thread-pool round trip); batches of several sessions at once overlap on the pool,
      // and so does a batch compressed there (large: its caller, an import, reads on meanwhile).
      // (A padding growth counts its zeros: what the sync flushes.)
      const inline =
        Array.isArray(unit) && this.#batchesInFlight === 1 && (padded?.bytes ?? parts[0].length + parts[1].length) <= SYNC_WRITE_MAX
      await fdatasyncFd(fd, inline)
      if (inline) this.#metrics.inlineSyncs++
      // A padded log's revision is its new end slot's (no stat: see `revisionOf`). Otherwise a synchronous
      // fstat of an open, just-synced file is a cheap system call (the inode is in memory); an asynchronous one, a round trip.
      if (padded === undefined) stats = fstatSync(fd)
    } catch (error) {
      await this.#appendFailed(writer, error as Error)
    } finally {
      this.#endChange(writer.id, op)
    }
    this.#committed(writer, parts, count, padded, stats)
  }

  /** A batch's write or sync failed: the log is truncated back to its committed end (or the writer dropped); then the typed error. */
  async #appendFailed(writer: Writer, error: Error): Promise<never> {
    try {
      await writer.handle.truncate(writer.committedEnd)
      await writer.handle.sync()
      // The padding went with the truncation; the next append grows it again.
      writer.fileEnd = writer.committedEnd
      writer.generation = 0
      writer.checkpoint = writer.committedEnd
    } catch {
      // The file may now hold part of the batch: forget this writer so the
      // next operation rescans (and truncates) the log from disk.
      await this.#dropWriter(writer)
    }
    throw persistenceError(
      'SESSION_PERSISTENCE_IO',
      `Appending to session ${writer.label} failed (${error.message}); nothing of the batch was committed.`,
      { cause: error, details: { id: writer.id } },
    )
  }

  /** A batch is written and synced: where the log now ends, its next seq and its revision. */
  #committed(
    writer: Writer,
    parts: readonly [Buffer, Buffer],
    count: number,
    padded: PaddedWrite | undefined,
    stats: Stats | undefined,
  ): void {
    writer.committedEnd += parts[0].length + parts[1].length
    writer.fileEnd = padded?.tail.fileEnd ?? writer.committedEnd
    writer.generation = padded?.tail.generation ?? 0
    writer.checkpoint = padded?.tail.checkpoint ?? writer.committedEnd
    writer.trailerCheck = trailerCheckOf(parts[1])
    writer.nextSeq += count
    writer.revision =
      stats === undefined
        ? paddedRevisionOf(writer.headerCrc, writer.ino, writer.fileEnd, {
            end: writer.committedEnd,
            trailerCheck: writer.trailerCheck,
          })
        : revisionOf(writer.headerCrc, stats)
    this.#metrics.appends++
  }

  /**
   * Takes the session's lock and opens its log for appending. Verifies the
   * header unit and the last committed batch with its trailer — not the whole
   * log (full verification stays in `inspect`, `load` and `verify`). When the
   * tail is not a complete batch (a crashed writer's torn tail, or damage),
   * the whole log's structure is checked and a torn tail truncated (nothing
   * committed is touched), so appends always continue a committed log.
   */
  async #openWriter(
    id: string,
    mode: 'create' | 'existing',
  ): Promise<
    | { kind: 'writer'; writer: Writer; truncated: boolean }
    | { kind: 'absent'; dir: string; lock: WriterLock; rootSync: Promise<void> }
    | { kind: 'missing' }
  > {
    const label = labelOf(id)
    const dir = join(this.root, encodeSessionDirName(id))
    await this.#reader.assertSessionDir(dir)
    let lock: WriterLock | undefined
    let createdDir = false
    // The new directory's entry must be durable before the first append is acknowledged; its
    // fsync runs concurrently with taking the lock and writing the log (awaited before the log is linked).
    let rootSync: Promise<void> | undefined
    for (let attempt = 0; lock === undefined; attempt++) {
      if (mode === 'create') {
        try {
          mkdirSync(dir, { mode: 0o700 })
          createdDir = true
          rootSync = fsyncDir(this.root)
          rootSync.catch(() => {})
        } catch (error) {
          if (!isErrno(error, 'EEXIST')) throw ioError(`create the directory of session ${label}`, error)
        }
      }
      try {
        lock = await WriterLock.acquire(join(dir, LOCK_FILE), label)
      } catch (error) {
        // The directory vanished (a concurrent delete): recreate it, or report absence.
        if (isErrno(error, 'ENOENT')) {
          if (mode === 'existing') return { kind: 'missing' }
          if (attempt > 8) throw ioError(`lock session ${label}`, error)
          continue
        }
        // No directory left behind by a failed create; every failure on the lock path is typed.
        if (createdDir) await this.#removeDir(dir).catch(() => {})
        if (error instanceof SessionPersistenceError) throw error
        throw ioError(`lock session ${label}`, error)
      }
    }
    const file = join(dir, this.#codec.logFileName)
    let handle: FileHandle
    try {
      this.#metrics.logOpens++
      // A directory this call just created holds a log only if another writer took the lock first and published one:
      // probe synchronously (an ENOENT from the thread pool costs a round trip, a time slice on a busy machine).
      if (createdDir) lstatSync(file)
      handle = await fsp.open(file, constants.O_RDWR | constants.O_NOFOLLOW)
    } catch (error) {
      if (isErrno(error, 'ENOENT')) {
        if (mode === 'create') {
          // A directory left by a create that crashed before publishing: make its entry durable before the log goes in.
          rootSync ??= fsyncDir(this.root)
          const synced = rootSync.catch((error: unknown) => {
            throw ioError(`make the directory of session ${label} durable`, error)
          })
          synced.catch(() => {})
          return { kind: 'absent', dir, lock, rootSync: synced }
        }
        await lock.release()
        return { kind: 'missing' }
      }
      await lock.release()
      if (isErrno(error, 'ELOOP', 'EISDIR', 'EACCES'))
        throw corrupt(file, 0, `the log cannot be opened as a regular file (${(error as NodeJS.ErrnoException).code})`)
      throw ioError(`open the log of session ${label}`, error)
    }
    try {
      const size = (await handle.stat()).size
      // The tail check below finds the end (and the revision) itself.
      const { buf: headBuf, unit } = await this.#reader.readHeaderUnit(handle, size, file, false)
      const physical = await decodeHeader(headBuf, unit, this.#codec, file)
      if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
      const headerEnd = unit.bodyEnd + this.#codec.trailer.size
      const firstSeq = physical.fork?.cut ?? 0
      let tail = await this.#reader.verifyTail(handle, size, headerEnd, firstSeq, file)
      let truncated = false
      if (tail === undefined) {
        // Not a clean tail: check the whole log's structure (lengths, seqs,
        // CRC32 of every stored unit) to tell a torn tail from damage.
        const buf = await this.#reader.countedRead(handle, 0, size)
        this.#metrics.bodyReads++
        const scan = await scanLog(buf, this.#codec, file, firstSeq)
        // Padding after a torn or unconfirmed tail goes with it (the next append grows it again).
        tail = {
          committedEnd: scan.committedEnd,
          nextSeq: scan.nextSeq,
          fileEnd: scan.committedEnd,
          generation: 0,
          checkpoint: scan.committedEnd,
          slot: undefined,
        }
        if (scan.committedEnd < size) {
          // A torn tail left by a crashed writer: never committed, so removing it loses nothing.
          await this.#journaled(id, async () => {
            await handle.truncate(scan.committedEnd)
            await handle.sync()
          })
          truncated = true
        }
      } else {
        this.#metrics.tailVerifications++
      }
      const headerCrc = unit.trailer.plainCrc
      const stats = await handle.stat()
      const revision = revisionOf(headerCrc, stats, tail.slot)
      const writer: Writer = {
        id,
        label,
        dir,
        file,
        lock,
        handle,
        physical,
        headerCrc,
        headerEnd,
        committedEnd: tail.committedEnd,
        fileEnd: tail.fileEnd,
        generation: tail.generation,
        checkpoint: tail.checkpoint,
        trailerCheck: tail.slot?.trailerCheck ?? 0,
        ino: stats.ino,
        nextSeq: tail.nextSeq,
        revision,
      }
      this.#remember(writer)
      return { kind: 'writer', writer, truncated }
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
      void this.#serial(otherId, () => this.#release(other)).catch(() => {})
    }
  }

  /** Releases a writer in order (eviction, close): its log's newest slot brought to the committed end first (`#settleSlot`). */
  async #release(writer: Writer): Promise<void> {
    await this.#settleSlot(writer)
    await this.#dropWriter(writer)
  }

  /**
   * Writes the slot that names the committed end when the newest names an
   * earlier one (`planSettledSlot`), so the log at rest reads with nothing
   * to walk. Every batch is synced already and the slot is a hint, so the
   * write is not synced; it is skipped when the lock is no longer ours, and
   * a failure costs readers only a walk.
   */
  async #settleSlot(writer: Writer): Promise<void> {
    if (!padsLog(this.#codec.compression, writer.physical)) return
    const settle = planSettledSlot(writer, writer.nextSeq, writer.trailerCheck)
    if (settle === undefined) return
    try {
      await writer.lock.verify(writer.label, 0)
      writevAtSync(writer.handle.fd, [settle.slot], settle.at)
      writer.generation = settle.tail.generation
      writer.checkpoint = settle.tail.checkpoint
    } catch {
      // Readers walk from the previous slot.
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
   * The whole log (a fork's inherited prefix included) is verified. The
   * session's writer lock stays held for the resumed session's appends.
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
      if (writer === undefined) {
        const opened = await this.#openWriter(id, 'existing')
        if (opened.kind !== 'writer') throw notFound(id)
        writer = opened.writer
        repaired = opened.truncated
      }
      let events: StoredSessionEvent[]
      try {
        throwIfAborted(signal, cancelled)
        const own = await this.#reader.readOwnFrom(writer.handle, writer.file, writer.committedEnd, signal)
        events = await this.#reader.joinedEvents(own, writer.file, signal)
      } catch (error) {
        // Do not keep a damaged (or unwanted) session locked.
        await this.#dropWriter(writer)
        throw error
      }
      const repairs = interruptedTurnEnds(events, this.#clock())
      if (repairs.length > 0) {
        await this.#writeBatch(writer, this.#encode(writer, repairs))
        events.push(...repairs)
        repaired = true
      }
      throwIfAborted(signal, cancelled)
      return Object.freeze({
        header: writer.physical.header,
        inheritedEventCount: writer.physical.inheritedEventCount,
        events: Object.freeze(events),
        revision: writer.revision,
        repaired,
      })
    })
  }

  /**
   * Explicit deletion. A session that forks reference is refused with
   * `SESSION_PERSISTENCE_REFERENCED`, unless `materializeDependants`: then
   * every dependant (and theirs, first) is rewritten to hold its prefix
   * itself before the session goes.
   */
  delete(id: SessionId, options: DeleteOptions = {}): Promise<boolean> {
    try {
      this.#assertWritable()
      assertStorableId(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#serial(id, async () => {
      let writer = this.#writers.get(id)
      if (writer === undefined) {
        // A session directory that is a symlink or not a directory is refused, never followed (not even to delete).
        await this.#reader.assertSessionDir(join(this.root, encodeSessionDirName(id)))
        const opened = await this.#openWriter(id, 'existing').catch((error: unknown) => {
          // A log too damaged to open can still be deleted explicitly.
          if (error instanceof Error && (error as { code?: string }).code === 'SESSION_PERSISTENCE_CORRUPT') return 'corrupt' as const
          throw error
        })
        if (opened === 'corrupt') return this.#deleteDamaged(id)
        // 'existing' mode reports a directory without a log as missing (its lock already released).
        if (opened.kind !== 'writer') return false
        writer = opened.writer
      }
      const { dir, lock } = writer
      const marker = join(dir, DELETING_FILE)
      // The marker names its writer: one left by a delete that crashed is recognised as stale.
      await fsp.writeFile(marker, JSON.stringify({ host: hostname(), pid: process.pid }), { mode: 0o600 }).catch((error: unknown) => {
        throw ioError(`mark session ${writer.label} for deletion`, error)
      })
      try {
        const dependants = await this.#liveDependants(id, writer.physical.logId)
        if (dependants.length > 0) {
          if (options.materializeDependants !== true) {
            throw persistenceError(
              'SESSION_PERSISTENCE_REFERENCED',
              `Session ${writer.label} is the source of ${dependants.length} fork(s) stored by reference (${dependants.slice(0, 3).map(labelOf).join(', ')}${dependants.length > 3 ? ', …' : ''}); deleting it would break them. Delete them first, or call delete(id, { materializeDependants: true }) to copy the inherited prefix into each of them first.`,
              { details: { id, dependants: dependants.slice(0, 20) } },
            )
          }
          for (const dependant of dependants) await this.#serial(dependant, () => this.#materialize(dependant))
        }
      } catch (error) {
        await fsp.unlink(marker).catch(() => {})
        throw error
      }
      this.#writers.delete(id)
      await writer.handle.close()
      let existed = true
      try {
        await this.#journaled(id, async () => {
          await fsp.unlink(writer.file)
          await fsyncDir(dir)
        })
      } catch (error) {
        if (!isErrno(error, 'ENOENT')) {
          await fsp.unlink(marker).catch(() => {})
          await lock.release()
          throw ioError(`delete session ${writer.label}`, error)
        }
        existed = false
      }
      if (writer.physical.fork) await this.#unregisterDependant(writer.physical.fork.source, id)
      await lock.release()
      await this.#removeDir(dir)
      return existed
    })
  }

  /** Deletes a log that cannot even be opened for writing (damaged header). Its dependants, if any, are already unreadable. */
  async #deleteDamaged(id: string): Promise<boolean> {
    const dir = join(this.root, encodeSessionDirName(id))
    const lock = await WriterLock.acquire(join(dir, LOCK_FILE), labelOf(id))
    try {
      await this.#journaled(id, async () => {
        await fsp.unlink(join(dir, this.#codec.logFileName))
        await fsyncDir(dir)
      })
    } finally {
      await lock.release()
    }
    await this.#removeDir(dir)
    return true
  }

  async #removeDir(dir: string): Promise<void> {
    try {
      for (const name of await fsp.readdir(dir)) {
        // Leftover temporary files of crashed writers (never those of a live
        // process: a writer that took the lock meanwhile may be about to link
        // its log), the deletion marker and dependants' registrations; a lock
        // taken meanwhile stays (and keeps the directory).
        if (name.startsWith('.') && name.includes('.tmp-')) {
          if (!isLiveTemp(name)) await fsp.unlink(join(dir, name)).catch(() => {})
        } else if (name === DELETING_FILE) await fsp.unlink(join(dir, name)).catch(() => {})
        else if (name === REFS_DIR) await fsp.rm(join(dir, name), { recursive: true, force: true }).catch(() => {})
      }
      await fsp.rmdir(dir)
      await fsyncDir(this.root)
    } catch (error) {
      if (!isErrno(error, 'ENOENT', 'ENOTEMPTY', 'EEXIST')) throw ioError(`remove ${dir}`, error)
    }
  }

  // ------------------------------------------------------------------ forks

  /**
   * The reference to events `[0, cut)` of `sourceId`: the log physically
   * holding event `cut - 1` (an ancestor when the cut lies in the source's
   * own inherited prefix), the end of the batch holding it and that batch's
   * trailer CRC. Reads the source's header and the trailers of the batches
   * after the cut — never the prefix itself.
   */
  async #locateCut(sourceId: string, cut: number, depth: number, expectLogId?: string): Promise<ForkReference> {
    if (depth > MAX_FORK_DEPTH)
      throw persistenceError(
        'SESSION_PERSISTENCE_CORRUPT',
        `The fork chain above session ${labelOf(sourceId)} is deeper than ${MAX_FORK_DEPTH}.`,
      )
    const label = labelOf(sourceId)
    const live = this.#writers.get(sourceId)
    let handle: FileHandle
    let owned = false
    let physical: PhysicalHeader
    let headerEnd: number
    let committedEnd: number
    let nextSeq: number
    const file = this.logPath(sourceId)
    if (live !== undefined) {
      ;({ handle, physical, headerEnd, committedEnd, nextSeq } = live)
    } else {
      const opened = await this.#reader.openForRead(file)
      if (opened === undefined) {
        throw persistenceError(
          'SESSION_PERSISTENCE_CONFLICT',
          `The fork source ${label} is not persisted; flush it before the fork's first append.`,
          { details: { id: sourceId } },
        )
      }
      handle = opened
      owned = true
    }
    try {
      if (live === undefined) {
        const size = (await handle.stat()).size
        const { buf, unit } = await this.#reader.readHeaderUnit(handle, size, file, false)
        physical = await decodeHeader(buf, unit, this.#codec, file)
        headerEnd = unit.bodyEnd + this.#codec.trailer.size
        // Locating the cut needs only where the committed log ends: a valid final trailer says so
        // (a torn write never ends in one). Every read of the fork verifies the prefix in full.
        const tail =
          (await this.#reader.lastTrailer(handle, size, headerEnd)) ??
          (await (async () => {
            const whole = await this.#reader.countedRead(handle, 0, size)
            this.#metrics.bodyReads++
            const scan = await scanLog(whole, this.#codec, file, physical.fork?.cut ?? 0)
            return { committedEnd: scan.committedEnd, nextSeq: scan.nextSeq }
          })())
        committedEnd = tail.committedEnd
        nextSeq = tail.nextSeq
      }
      const source = physical!
      if (expectLogId !== undefined && source.logId !== expectLogId) {
        throw persistenceError(
          'SESSION_PERSISTENCE_CORRUPT',
          `Session ${label} was re-created since a fork referenced it (its log identity changed).`,
          { details: { id: sourceId } },
        )
      }
      if (source.header.id !== sourceId) throw corrupt(file, 0, `the header names session ${labelOf(source.header.id)}`)
      if (nextSeq! < cut) {
        throw persistenceError(
          'SESSION_PERSISTENCE_CONFLICT',
          `The fork source ${label} holds ${nextSeq!} committed events, fewer than the fork's cut ${cut}; flush the source up to the cut before the fork's first append.`,
          { details: { id: sourceId, cut } },
        )
      }
      const ownStart = source.fork?.cut ?? 0
      if (source.fork !== undefined && cut <= ownStart) return this.#locateCut(source.fork.source, cut, depth + 1, source.fork.logId)
      const trailerSize = this.#codec.trailer.size
      let end = committedEnd!
      while (end > headerEnd!) {
        const trailer = this.#codec.trailer.decode(await this.#reader.countedRead(handle, end - trailerSize, trailerSize), 0)
        if (trailer === undefined || trailer.kind !== 'batch')
          throw corrupt(file, end - trailerSize, 'a batch trailer is missing or damaged')
        if (trailer.firstSeq <= cut - 1 && cut - 1 < trailer.firstSeq + trailer.count) {
          return { source: sourceId, logId: source.logId, cut, end, batchCrc: trailer.bodyCrc }
        }
        end -= trailerSize + trailer.bodyLength
      }
      throw corrupt(file, end, `no committed batch holds event ${cut - 1}`)
    } finally {
      if (owned) await handle.close()
    }
  }

  async #unregisterDependant(sourceId: string, childId: string): Promise<void> {
    await fsp.unlink(join(this.root, encodeSessionDirName(sourceId), REFS_DIR, encodeSessionDirName(childId))).catch(() => {})
  }

  /** Dependants that still reference this lifecycle of `id`; stale registrations (a fork never published, or deleted) are removed. */
  async #liveDependants(id: string, logId: string): Promise<string[]> {
    const refs = join(this.root, encodeSessionDirName(id), REFS_DIR)
    let names: string[]
    try {
      names = await fsp.readdir(refs)
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return []
      throw ioError(`read the fork registrations of session ${labelOf(id)}`, error)
    }
    const live: string[] = []
    for (const name of names) {
      if (!isSessionDirName(name)) continue
      const path = join(refs, name)
      let physical: PhysicalHeader | undefined
      try {
        physical = await this.#reader.readPhysicalAt(join(this.root, name, this.#codec.logFileName))
      } catch (error) {
        // A dependant whose header is damaged cannot be materialized; it keeps the source (delete it explicitly first).
        throw persistenceError(
          'SESSION_PERSISTENCE_REFERENCED',
          `Session ${labelOf(id)} may be referenced by the fork stored in ${join(this.root, name)}, whose log cannot be read (${(error as Error).message}); delete that fork explicitly first.`,
          { cause: error, details: { id } },
        )
      }
      if (physical === undefined) {
        // No published log: a fork that never completed — or one whose creator (holding the child's lock) checked
        // this source's `deleting` marker before it was written, and is about to publish. Removing that registration
        // would let the fork appear referencing a deleted source: while its creator lives, the source is kept.
        const creator = await liveHolder(join(this.root, name, LOCK_FILE))
        if (creator !== undefined) {
          throw persistenceError(
            'SESSION_PERSISTENCE_REFERENCED',
            `Session ${labelOf(id)} is being forked (the fork in ${join(this.root, name)} is being created by process ${creator.pid} on ${creator.host}); retry the delete once that fork is stored or has failed.`,
            { details: { id, pid: creator.pid, host: creator.host } },
          )
        }
      }
      if (physical?.fork?.source === id && physical.fork.logId === logId) live.push(physical.header.id)
      else await fsp.unlink(path).catch(() => {})
    }
    return live
  }

  /**
   * Rewrites a fork stored by reference as a self-contained log (header
   * without reference, one batch of every event), after materializing its
   * own dependants (their references name this log's bytes). Atomic: a
   * temporary file renamed over the log.
   */
  async #materialize(childId: string): Promise<void> {
    let writer = this.#writers.get(childId)
    if (writer === undefined) {
      const opened = await this.#openWriter(childId, 'existing')
      if (opened.kind !== 'writer') return
      writer = opened.writer
    }
    const fork = writer.physical.fork
    if (fork === undefined) return
    for (const dependant of await this.#liveDependants(childId, writer.physical.logId))
      await this.#serial(dependant, () => this.#materialize(dependant))
    const own = await this.#reader.readOwnFrom(writer.handle, writer.file, writer.committedEnd, undefined)
    const events = await this.#reader.joinedEvents(own, writer.file, undefined)
    const physical: PhysicalHeader = {
      header: writer.physical.header,
      inheritedEventCount: writer.physical.inheritedEventCount,
      logId: newLogId(),
    }
    const headerLine = encodeHeaderLine(physical)
    const headerUnit = encodeUnit(this.#codec, headerLine, 'header', 0, 0)
    const data = Buffer.concat(
      events.length > 0 ? [headerUnit, ...(await encodeBatchUnit(this.#codec, physical, events, 0))] : [headerUnit],
    )
    const temp = tempSibling(writer.file)
    const tempHandle = await fsp.open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      await writeAt(tempHandle, data, 0)
      await tempHandle.sync()
    } finally {
      await tempHandle.close()
    }
    const w = writer
    await this.#journaled(childId, async () => {
      try {
        await fsp.rename(temp, w.file)
        await fsyncDir(w.dir)
      } catch (error) {
        await fsp.unlink(temp).catch(() => {})
        throw ioError(`materialize fork ${w.label}`, error)
      }
    })
    await w.handle.close()
    this.#metrics.logOpens++
    w.handle = await fsp.open(w.file, constants.O_RDWR)
    w.physical = physical
    w.headerCrc = crc32(headerLine)
    w.headerEnd = headerUnit.length
    w.committedEnd = data.length
    w.fileEnd = data.length
    w.generation = 0
    w.checkpoint = data.length
    w.trailerCheck = 0
    const stats = await w.handle.stat()
    w.ino = stats.ino
    w.revision = revisionOf(w.headerCrc, stats)
    await this.#unregisterDependant(fork.source, childId)
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
    const { observation, committedEnd, size, fork } = await this.#readLog(id, signal)
    return Object.freeze({
      id,
      events: observation.events.length,
      committedBytes: committedEnd,
      tornBytes: size - committedEnd,
      ...(fork ? { forkSource: fork.source } : {}),
    })
  }

  async #readLog(
    id: SessionId,
    signal: AbortSignal | undefined,
  ): Promise<{ observation: SessionObservation; committedEnd: number; size: number; fork: ForkReference | undefined }> {
    this.#assertOpen()
    assertStorableId(id)
    throwIfAborted(signal, cancelled)
    const file = this.logPath(id)
    const handle = await this.#reader.openForRead(file)
    if (handle === undefined) throw notFound(id)
    let own: OwnRead
    try {
      own = await this.#reader.readOwnFrom(handle, file, undefined, signal)
    } finally {
      await handle.close()
    }
    if (own.physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(own.physical.header.id)}`)
    const events = await this.#reader.joinedEvents(own, file, signal)
    throwIfAborted(signal, cancelled)
    const revision = revisionOf(own.scan.header.trailer.plainCrc, own.stats, own.slot)
    const observation = Object.freeze({
      header: own.physical.header,
      inheritedEventCount: own.physical.inheritedEventCount,
      events: Object.freeze(events),
      revision,
    })
    // A valid padding frame after the committed end is not a torn tail.
    return { observation, committedEnd: own.scan.committedEnd, size: own.buf.length - own.scan.paddingBytes, fork: own.physical.fork }
  }

  /**
   * The committed events with `seq >= from`, reading only what proves them:
   * the header, then the trailers from the end back to the batch holding
   * `from`, then those batches (checked and decoded). A fork read from its
   * cut reads only its own log, after checking that its source still carries
   * the referenced identity and batch (header and one trailer, not the
   * prefix). Logs whose tail is not a clean batch are read in full.
   */
  async inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    this.#assertOpen()
    assertStorableId(id)
    SessionLogOffset(from)
    throwIfAborted(signal, cancelled)
    const file = this.logPath(id)
    const opened = await this.#reader.openWithStats(file)
    if (opened === undefined) throw notFound(id)
    const { handle, stats } = opened
    let result: SessionSuffixObservation | undefined
    try {
      const size = Number(stats.size)
      // The tail check below finds the end and the revision (the same walk as `stat`'s).
      const { buf: headBuf, unit } = await this.#reader.readHeaderUnit(handle, size, file, false)
      const physical = await decodeHeader(headBuf, unit, this.#codec, file)
      if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
      const firstSeq = physical.fork?.cut ?? 0
      const headerEnd = unit.bodyEnd + this.#codec.trailer.size
      if (from >= firstSeq) {
        const tail = await this.#reader.verifyTail(handle, size, headerEnd, firstSeq, file)
        if (tail !== undefined) {
          if (physical.fork) await this.#reader.checkReference(physical.fork, file)
          const events = await this.#reader.readSuffix(handle, file, headerEnd, tail.committedEnd, tail.nextSeq, from, signal)
          result = Object.freeze({
            header: physical.header,
            inheritedEventCount: physical.inheritedEventCount,
            revision: revisionOf(unit.trailer.plainCrc, stats, tail.slot),
            from,
            events: Object.freeze(events),
          })
        }
      }
    } finally {
      await handle.close()
    }
    if (result !== undefined) return result
    const { observation } = await this.#readLog(id, signal)
    return Object.freeze({ ...observation, from, events: Object.freeze(observation.events.slice(from)) })
  }

  /** The revision, from the log's header unit (its CRC) and file metadata; no body is read. */
  async stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    this.#assertOpen()
    assertStorableId(id)
    throwIfAborted(signal, cancelled)
    const file = this.logPath(id)
    const opened = await this.#reader.openWithStats(file)
    if (opened === undefined) return undefined
    const { handle, stats } = opened
    try {
      const { unit, slot } = await this.#reader.readHeaderUnit(handle, Number(stats.size), file)
      throwIfAborted(signal, cancelled)
      return revisionOf(unit.trailer.plainCrc, stats, slot)
    } finally {
      await handle.close()
    }
  }

  /** Header-only records of every persisted session: reads each log's header unit and nothing else. */
  async list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    this.#assertOpen()
    throwIfAborted(signal, cancelled)
    let entries: import('node:fs').Dirent[]
    try {
      entries = await fsp.readdir(this.root, { withFileTypes: true })
    } catch (error) {
      throw ioError(`read the root ${this.root}`, error)
    }
    const names = entries.filter((e) => e.isDirectory() && isSessionDirName(e.name)).map((e) => e.name)
    const records: PersistedSessionRecord[] = []
    const damaged: DamagedLog[] = []
    // Entries named like sessions that are not directories (a symlink, a foreign file) are damaged entries, never followed.
    for (const entry of entries) {
      if (entry.isDirectory() || !isSessionDirName(entry.name)) continue
      const dir = join(this.root, entry.name)
      const reason = entry.isSymbolicLink()
        ? 'a symbolic link (never followed out of the root)'
        : entry.isFile()
          ? 'a file, not a session directory'
          : 'not a session directory'
      damaged.push(
        Object.freeze({
          dir,
          id: decodeSessionDirName(entry.name),
          code: 'SESSION_PERSISTENCE_CORRUPT' as const,
          message: `${dir} is ${reason}.`,
        }),
      )
    }
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
            (error.code !== 'SESSION_PERSISTENCE_CORRUPT' &&
              error.code !== 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' &&
              error.code !== 'SESSION_PERSISTENCE_IO')
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
    const opened = await this.#reader.openWithStats(file)
    if (opened === undefined) return undefined
    const { handle, stats } = opened
    try {
      const { buf, unit, slot } = await this.#reader.readHeaderUnit(handle, Number(stats.size), file)
      const physical = await decodeHeader(buf, unit, this.#codec, file)
      if (encodeSessionDirName(physical.header.id) !== name) {
        throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}, which is not stored in this directory`)
      }
      return Object.freeze({
        header: physical.header,
        inheritedEventCount: physical.inheritedEventCount,
        revision: revisionOf(unit.trailer.plainCrc, stats, slot),
      })
    } finally {
      await handle.close()
    }
  }

  // ---------------------------------------------------------- change feed

  #beginChange(id: string): string | undefined {
    return this.#journal?.begin(id)
  }

  #endChange(id: string, op: string | undefined): void {
    if (op !== undefined) this.#journal?.end(id, op)
  }

  /** Runs a change of `id`'s log between its journal records (see `change-journal.ts`). */
  async #journaled<T>(id: string, change: () => Promise<T>): Promise<T> {
    const op = this.#beginChange(id)
    try {
      return await change()
    } finally {
      this.#endChange(id, op)
    }
  }

  // ------------------------------------------------------------- lifecycle

  /** Releases every writer (lock and log); the front closes the journal after. */
  async close(): Promise<void> {
    this.#closed = true
    while (this.#chains.size > 0) await Promise.all(this.#chains.values())
    const writers = [...this.#writers.values()]
    this.#writers.clear()
    const results = await Promise.allSettled(
      writers.map(async (w) => {
        await this.#settleSlot(w)
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
    if (this.#closed) throw closedError(this.root)
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

  #serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(id) ?? Promise.resolve()
    const result = previous.then(operation)
    this.#queued.set(id, (this.#queued.get(id) ?? 0) + 1)
    // Counted out by the first reaction to the result: before any caller awaiting it resumes.
    const settled = (): void => {
      const left = this.#queued.get(id)! - 1
      if (left === 0) this.#queued.delete(id)
      else this.#queued.set(id, left)
      if (this.#chains.get(id) === tail) this.#chains.delete(id)
    }
    const tail = result.then(settled, settled)
    this.#chains.set(id, tail)
    return result
  }
}
