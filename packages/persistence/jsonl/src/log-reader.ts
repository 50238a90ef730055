import { constants, promises as fsp, lstatSync, type Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { crc32 } from 'node:zlib'
import { throwIfAborted } from '@dsh/context'
import type { StoredSessionEvent } from '@dsh/session'
import { persistenceCancelled as cancelled, LINE_MAX_BYTES, type SessionPersistenceError } from '@dsh/session-persistence/backend'
import type { LogCodec } from './codec.js'
import { ioError } from './errors.js'
import { isCutBatch, prefixBroken, prefixFailure, sourceLogFile } from './fork-prefix.js'
import { isErrno, type RevisionSlot, readAt } from './fs-io.js'
import { encodeSessionDirName } from './id-encoding.js'
import type { ForkReference, PhysicalHeader } from './log-format.js'
import { mayBePadded, SLOTS_BYTES } from './log-padding.js'
import {
  corrupt,
  decodeEvents,
  decodeHeader,
  type LogScan,
  type LogUnit,
  locateHeader,
  PADDING_DAMAGED,
  scanLog,
  unreadable,
} from './log-scan.js'
import { type LastBatch, lastBatch, tailAsync, tailSync, type VerifiedTail, walkToPadding } from './log-tail.js'
import { plainDigest } from './long-lines.js'
import type { JsonlPersistenceMetrics } from './types.js'

/** `list` and `stat` read this much of a log first: typically the whole header unit and little else. */
const HEADER_PREFIX_BYTES = 512

/** A log read in full (its own units; a fork's prefix is joined separately). */
export interface OwnRead {
  readonly physical: PhysicalHeader
  readonly scan: LogScan
  readonly buf: Buffer
  readonly stats: Stats
  /** The newest end slot when the log read in full ends with padding (its revision). */
  readonly slot: RevisionSlot | undefined
}

/**
 * Every read of a root's logs: opening (never through a symlink), the header
 * unit, the tail check of a fresh writer, whole-log reads with full
 * verification, a fork's inherited prefix (verified against its reference)
 * and suffix reads. Counts what it reads in the backend's metrics. Holds no
 * state of its own: the backend's writers and locks stay in `persistence.ts`.
 */
export class LogReader {
  constructor(
    readonly root: string,
    readonly codec: LogCodec,
    readonly metrics: JsonlPersistenceMetrics,
  ) {}

  /** The log file of `id` (whether or not it exists). */
  logPath(id: string): string {
    return join(this.root, encodeSessionDirName(id), this.codec.logFileName)
  }

  /**
   * The committed end and next seq of a log whose tail is a complete,
   * consistent batch — at the end of the file, or (a padded log) at the end
   * named by the newest end slot and confirmed by the padding frame there:
   * its trailer (self-checked), its stored body (CRC32), its frame extent
   * and its plaintext (decoded, CRC32). `undefined` when the tail is anything
   * else (the caller scans the whole log).
   */
  async verifyTail(handle: FileHandle, size: number, headerEnd: number, firstSeq: number, file: string): Promise<VerifiedTail | undefined> {
    if (size === headerEnd)
      return { committedEnd: size, nextSeq: firstSeq, fileEnd: size, generation: 0, checkpoint: size, slot: undefined }
    const trailerSize = this.codec.trailer.size
    const last = await this.lastBatch(handle, size, headerEnd)
    if (last === undefined || last.trailer.firstSeq < firstSeq) return undefined
    const { trailer, tail } = last
    const bodyStart = tail.committedEnd - trailerSize - trailer.bodyLength
    const unitBuf = await this.countedRead(handle, bodyStart, trailer.bodyLength + trailerSize)
    const body = unitBuf.subarray(0, trailer.bodyLength)
    const extent = this.codec.measureBody(unitBuf, 0)
    if (extent.status !== 'complete' || extent.end !== trailer.bodyLength || crc32(body) !== trailer.bodyCrc) return undefined
    if (trailer.plainLength > LINE_MAX_BYTES) {
      // Checked a chunk at a time: a batch this large is never decoded whole.
      const digest = await Promise.resolve()
        .then(() => plainDigest(this.codec, body))
        .catch(() => undefined)
      if (digest === undefined || digest.length !== trailer.plainLength || digest.crc !== trailer.plainCrc) {
        throw corrupt(file, bodyStart, 'the last committed batch does not decode to what its trailer records')
      }
      return tail
    }
    const [plain] = await this.codec
      .decodeRun(unitBuf, [{ bodyStart: 0, bodyEnd: trailer.bodyLength, plainLength: trailer.plainLength }])
      .catch(() => [undefined])
    if (plain === undefined || plain.length !== trailer.plainLength || crc32(plain) !== trailer.plainCrc) {
      throw corrupt(file, bodyStart, 'the last committed batch does not decode to what its trailer records')
    }
    return tail
  }

  /** The committed end and next seq when the log ends with a valid batch trailer (self-checked), or with padding whose newest slot agrees with the trailer before it. */
  async lastTrailer(handle: FileHandle, size: number, headerEnd: number): Promise<VerifiedTail | undefined> {
    return (await this.lastBatch(handle, size, headerEnd))?.tail
  }

  private lastBatch(handle: FileHandle, size: number, headerEnd: number): Promise<LastBatch | undefined> {
    return tailAsync(lastBatch(this.codec, size, headerEnd), (position, length) => this.countedRead(handle, position, length))
  }

  /** Reads a log's own units in full and checks their structure (every CRC); `upTo` bounds the read (a writer's committed end). */
  async readOwnFrom(handle: FileHandle, file: string, upTo: number | undefined, signal: AbortSignal | undefined): Promise<OwnRead> {
    let buf: Buffer
    let stats: Stats
    let physical: PhysicalHeader
    let scan: LogScan
    for (let raced = 0; ; raced++) {
      // A concurrent truncation (crash repair by another process) can make the
      // read come up short; read again from a fresh size.
      for (let attempt = 0; ; attempt++) {
        stats = await handle.stat()
        const size = upTo ?? Number(stats.size)
        buf = await this.countedRead(handle, 0, size, file)
        if (buf.length === size || attempt >= 3) break
      }
      this.metrics.bodyReads++
      throwIfAborted(signal, cancelled)
      const header = locateHeader(buf, this.codec, file, true)
      if (header === 'more') throw corrupt(file, 0, 'the header unit is truncated')
      physical = await decodeHeader(buf, header, this.codec, file)
      try {
        scan = await scanLog(buf, this.codec, file, physical.fork?.cut ?? 0)
        break
      } catch (error) {
        // An append in flight writes into the padding while it is read: damage stays, a race does not.
        if (raced > 0 || (error as SessionPersistenceError).details?.reason !== PADDING_DAMAGED) throw error
      }
    }
    // The same walk from the same slot as `readHeaderUnit` for `stat` and `list`: all of them report one revision.
    const headerEnd = scan.header.bodyEnd + this.codec.trailer.size
    const slot =
      upTo === undefined
        ? tailSync(walkToPadding(this.codec, buf.length, headerEnd), (position, length) => buf.subarray(position, position + length))
            ?.revision
        : undefined
    return { physical, scan, buf, stats, slot }
  }

  /** Every committed event of a log read in full: a fork's inherited prefix (resolved through its chain) and its own events. */
  async joinedEvents(own: OwnRead, file: string, signal: AbortSignal | undefined): Promise<StoredSessionEvent[]> {
    const check = (): void => throwIfAborted(signal, cancelled)
    const ownEvents = await decodeEvents(own.buf, own.scan, this.codec, file, check)
    const fork = own.physical.fork
    if (fork === undefined) return ownEvents
    const prefix = await this.resolvePrefix(fork, file, signal, 0)
    return prefix.concat(ownEvents)
  }

  /**
   * Events `[0, fork.cut)` from the referenced log, verified: the log must
   * carry the reference's `logId`, hold a committed batch ending at
   * `fork.end` whose trailer has `fork.batchCrc` and holds event `cut - 1`,
   * and every batch before it must pass its checksums. Anything else makes
   * the fork's read fail with `SESSION_PERSISTENCE_CORRUPT`.
   */
  async resolvePrefix(
    fork: ForkReference,
    childFile: string,
    signal: AbortSignal | undefined,
    depth: number,
  ): Promise<StoredSessionEvent[]> {
    const broken = prefixBroken(fork, childFile)
    const file = sourceLogFile((id) => this.logPath(id), fork, depth, broken)
    const handle = await this.openForRead(file)
    if (handle === undefined) throw broken('the source is not persisted')
    let buf: Buffer
    try {
      buf = await this.countedRead(handle, 0, fork.end, file)
    } finally {
      await handle.close()
    }
    if (buf.length !== fork.end) throw broken('the source log is shorter than the referenced prefix')
    throwIfAborted(signal, cancelled)
    try {
      const header = locateHeader(buf, this.codec, file, true)
      if (header === 'more') throw broken('the source header is truncated')
      const physical = await decodeHeader(buf, header, this.codec, file)
      if (physical.logId !== fork.logId || physical.header.id !== fork.source)
        throw broken('the source was re-created or replaced (its log identity differs)')
      const scan = await scanLog(buf, this.codec, file, physical.fork?.cut ?? 0)
      const last = scan.batches.at(-1)
      if (scan.committedEnd !== fork.end || last === undefined) throw broken('the referenced prefix does not end at a committed batch')
      if (!isCutBatch(last.trailer, fork)) throw broken('the batch at the cut differs from the referenced one')
      const own = await decodeEvents(buf, scan, this.codec, file, () => throwIfAborted(signal, cancelled))
      const before = physical.fork ? await this.resolvePrefix(physical.fork, file, signal, depth + 1) : []
      const all = before.concat(own)
      if (all.length < fork.cut) throw broken('the source holds fewer events than the cut')
      return all.slice(0, fork.cut)
    } catch (error) {
      throw prefixFailure(error, childFile, broken)
    }
  }

  /** The cheap part of a fork's integrity: the source still has the referenced identity and the referenced trailer at the cut. */
  async checkReference(fork: ForkReference, childFile: string): Promise<void> {
    const broken = prefixBroken(fork, childFile)
    const file = this.logPath(fork.source)
    const handle = await this.openForRead(file)
    if (handle === undefined) throw broken('the source is not persisted')
    try {
      const size = Number((await handle.stat()).size)
      if (size < fork.end) throw broken('the source log is shorter than the referenced prefix')
      const { buf, unit } = await this.readHeaderUnit(handle, size, file, false).catch((error: unknown) => {
        throw broken((error as Error).message, error)
      })
      const physical = await decodeHeader(buf, unit, this.codec, file).catch((error: unknown) => {
        throw broken((error as Error).message, error)
      })
      if (physical.logId !== fork.logId) throw broken('the source was re-created or replaced (its log identity differs)')
      const trailerSize = this.codec.trailer.size
      const trailer = this.codec.trailer.decode(await this.countedRead(handle, fork.end - trailerSize, trailerSize), 0)
      if (trailer === undefined || trailer.kind !== 'batch' || !isCutBatch(trailer, fork))
        throw broken('the batch at the cut differs from the referenced one')
    } finally {
      await handle.close()
    }
  }

  async readPhysicalAt(file: string): Promise<PhysicalHeader | undefined> {
    const handle = await this.openForRead(file)
    if (handle === undefined) return undefined
    try {
      const { buf, unit } = await this.readHeaderUnit(handle, Number((await handle.stat()).size), file, false)
      return await decodeHeader(buf, unit, this.codec, file)
    } finally {
      await handle.close()
    }
  }

  /**
   * Reads a bounded prefix holding the header unit (growing it only for an
   * unusually large header), and, when the log may be padded, its newest end
   * slot and the walk from it to the committed end (`slot`, the revision: a
   * padded log's size does not change with an append), settled or not
   * (`log-padding.ts`, invariant 7). Otherwise unverified: a torn slot only
   * makes a revision differ. `revision: false` (a caller that finds the end
   * its own way, or needs only the header) reads no slot.
   */
  async readHeaderUnit(
    handle: FileHandle,
    size: number,
    file: string,
    revision = true,
  ): Promise<{ buf: Buffer; unit: LogUnit; slot: RevisionSlot | undefined }> {
    this.metrics.headerReads++
    // The slots are read alongside the prefix (two reads in flight on the pool, not one after the other).
    const slots =
      revision && mayBePadded(this.codec.compression, size) ? this.countedRead(handle, size - SLOTS_BYTES, SLOTS_BYTES) : undefined
    slots?.catch(() => {}) // awaited below, unless the header fails first
    let length = Math.min(size, HEADER_PREFIX_BYTES)
    for (;;) {
      const buf = await this.countedRead(handle, 0, length)
      const unit = locateHeader(buf, this.codec, file, buf.length >= size)
      if (unit !== 'more') {
        if (slots === undefined) return { buf, unit, slot: undefined }
        // The walk's first read is the slots read above.
        const walk = walkToPadding(this.codec, size, unit.bodyEnd + this.codec.trailer.size)
        const found = await tailAsync(walk, (position, length) =>
          position === size - SLOTS_BYTES && length === SLOTS_BYTES ? slots : this.countedRead(handle, position, length),
        )
        return { buf, unit, slot: found?.revision }
      }
      length = Math.min(size, length * 4)
    }
  }

  /** `readAt`, counted in the metrics; `file` names the log in a too-large read's error. */
  async countedRead(handle: FileHandle, position: number, length: number, file?: string): Promise<Buffer> {
    const buf = await readAt(handle, position, length, file)
    this.metrics.bytesRead += buf.length
    return buf
  }

  /**
   * Opens a log for reading, never through a symlink (neither the session
   * directory nor the log may be one: symlinks are never followed out of the
   * root); `undefined` when there is none. Any other per-entry fault — a
   * directory where the log should be, no permission, a loop — is a damaged
   * entry (`SESSION_PERSISTENCE_CORRUPT`), exactly as `list` reports it.
   */
  async openForRead(file: string): Promise<FileHandle | undefined> {
    return (await this.openWithStats(file))?.handle
  }

  /** `openForRead`, with the file's metadata its regular-file check took (a caller that needs the size stats once, not twice). */
  async openWithStats(file: string): Promise<{ handle: FileHandle; stats: Stats } | undefined> {
    this.metrics.logOpens++
    await this.assertSessionDir(dirname(file))
    let handle: FileHandle
    try {
      // O_NONBLOCK: opening a FIFO planted where the log should be returns at once (refused below) instead of waiting for a writer.
      handle = await fsp.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
      if (isErrno(error, 'EACCES', 'EPERM')) throw unreadable(file, (error as NodeJS.ErrnoException).code!)
      if (isErrno(error, 'ELOOP', 'EISDIR'))
        throw corrupt(file, 0, `the log cannot be opened as a regular file (${(error as NodeJS.ErrnoException).code})`)
      throw ioError(`open ${file}`, error)
    }
    const stats = await handle.stat()
    if (!stats.isFile()) {
      await handle.close()
      throw corrupt(file, 0, 'the log is not a regular file (a directory, FIFO or device where the log should be?)')
    }
    return { handle, stats }
  }

  /** The session directory must be a real directory inside the root (absent is fine: the caller reports absence). */
  async assertSessionDir(dir: string): Promise<void> {
    let stats: Stats
    try {
      stats = lstatSync(dir)
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return
      throw corrupt(dir, 0, `the session directory cannot be examined (${(error as NodeJS.ErrnoException).code})`)
    }
    if (!stats.isDirectory()) throw corrupt(dir, 0, entryFault(stats))
  }
}

/** Why a path that should be a session directory is not one. */
function entryFault(stats: Stats): string {
  return stats.isSymbolicLink() ? 'a symbolic link where a session directory should be (never followed out of the root)' : 'not a directory'
}
