import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, readSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { crc32 } from 'node:zlib'
import { persistenceError } from '@dsh/session-persistence/backend'
import type { LogCodec } from './codec.js'
import { entryRefused, labelOf } from './errors.js'
import { MAX_FORK_DEPTH } from './fork-prefix.js'
import { fsyncDirSync, isErrno } from './fs-io.js'
import { encodeSessionDirName } from './id-encoding.js'
import type { ForkReference, PhysicalHeader } from './log-format.js'
import { corrupt, locateHeader, physicalHeaderOf } from './log-scan.js'
import { lastBatch, tailSync } from './log-tail.js'
import { isAlive, ownIdentity, type ProcessIdentity } from './process-identity.js'

/**
 * Creating a fork by reference, synchronously: the few small reads and
 * directory operations a fork costs run on the calling thread instead of a
 * thread-pool round trip each (on a busy machine every round trip waits for a
 * time slice; a fork would then cost more than copying the transcript). No
 * read here is larger than a header unit or a trailer, and the only fsync is
 * of one small directory.
 *
 * Invariants: the reference names the log that physically holds event
 * `cut - 1` (an ancestor when the cut lies in a fork's own inherited prefix),
 * by its `logId`, the end of the batch holding that event and that batch's
 * trailer CRC; it is computed from the source's header and the trailers of
 * the batches after the cut, never from the prefix.
 */

/** What the writer of a live source (in this process) knows: no need to read its tail. */
export interface LiveSource {
  readonly fd: number
  readonly physical: PhysicalHeader
  readonly headerEnd: number
  readonly committedEnd: number
  readonly nextSeq: number
}

export interface ForkIo {
  readonly root: string
  readonly codec: LogCodec
  logPath(id: string): string
  live(id: string): LiveSource | undefined
  /** Counts a read (bytes) and, for header reads, a header read. */
  counted(bytes: number, header?: boolean): void
  /** Counts a log opened (the `logOpens` metric). */
  opened(): void
}

/** A chain of forks by reference longer than `MAX_FORK_DEPTH` above a fork's source (a cycle can only come from tampering). */
export function forkChainTooDeep(sourceId: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CORRUPT',
    `The fork chain above session ${labelOf(sourceId)} is deeper than ${MAX_FORK_DEPTH}.`,
  )
}

/** The fork source has no log yet: the fork waits for the source's flush. */
export function sourceNotPersisted(sourceId: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CONFLICT',
    `The fork source ${labelOf(sourceId)} is not persisted; flush it before the fork's first append.`,
    { details: { id: sourceId } },
  )
}

/**
 * Refuses a source log in which a fork's cut cannot be located: another log
 * than the reference being followed names (`expectLogId`: the source was
 * re-created), a header of another session, or fewer committed events than
 * the cut.
 */
export function checkCutSource(
  source: { readonly physical: PhysicalHeader; readonly nextSeq: number },
  sourceId: string,
  cut: number,
  expectLogId: string | undefined,
  file: string,
): void {
  const { physical, nextSeq } = source
  const label = labelOf(sourceId)
  if (expectLogId !== undefined && physical.logId !== expectLogId) {
    throw persistenceError(
      'SESSION_PERSISTENCE_CORRUPT',
      `Session ${label} was re-created since a fork referenced it (its log identity changed).`,
      { details: { id: sourceId } },
    )
  }
  if (physical.header.id !== sourceId) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
  if (nextSeq < cut) {
    throw persistenceError(
      'SESSION_PERSISTENCE_CONFLICT',
      `The fork source ${label} holds ${nextSeq} committed events, fewer than the fork's cut ${cut}; flush the source up to the cut before the fork's first append.`,
      { details: { id: sourceId, cut } },
    )
  }
}

/** Where a fork's cut is: the reference to it, and the referenced log's own reference (when that log is a fork). */
export interface LocatedCut {
  readonly reference: ForkReference
  readonly above: ForkReference | undefined
}

/** `undefined` = the source's tail is not a clean batch: the caller falls back to a full scan. */
export function locateCutSync(io: ForkIo, sourceId: string, cut: number, maxDepth: number, expectLogId?: string): LocatedCut | undefined {
  if (maxDepth < 0) throw forkChainTooDeep(sourceId)
  const live = io.live(sourceId)
  const file = io.logPath(sourceId)
  let fd: number
  let owned = false
  let source: LiveSource
  if (live !== undefined) {
    fd = live.fd
    source = live
  } else {
    io.opened()
    const opened = openLogSync(file)
    if (opened === undefined) throw sourceNotPersisted(sourceId)
    fd = opened
    owned = true
    try {
      const size = fstatSync(fd).size
      const { physical, headerEnd } = readHeaderSync(io, fd, size, file)
      const last = tailSync(lastBatch(io.codec, size, headerEnd), (position, length) => readExact(io, fd, position, length))
      if (last === undefined) {
        closeSync(fd)
        return undefined
      }
      source = { fd, physical, headerEnd, committedEnd: last.tail.committedEnd, nextSeq: last.tail.nextSeq }
    } catch (error) {
      closeSync(fd)
      throw error
    }
  }
  try {
    const { physical, headerEnd, committedEnd } = source
    checkCutSource(source, sourceId, cut, expectLogId, file)
    if (physical.fork !== undefined && cut <= physical.fork.cut)
      return locateCutSync(io, physical.fork.source, cut, maxDepth - 1, physical.fork.logId)
    const trailerSize = io.codec.trailer.size
    let end = committedEnd
    while (end > headerEnd) {
      const trailer = io.codec.trailer.decode(readExact(io, fd, end - trailerSize, trailerSize), 0)
      if (trailer === undefined || trailer.kind !== 'batch') throw corrupt(file, end - trailerSize, 'a batch trailer is missing or damaged')
      if (trailer.firstSeq <= cut - 1 && cut - 1 < trailer.firstSeq + trailer.count) {
        return { reference: { source: sourceId, logId: physical.logId, cut, end, batchCrc: trailer.bodyCrc }, above: physical.fork }
      }
      end -= trailerSize + trailer.bodyLength
    }
    throw corrupt(file, end, `no committed batch holds event ${cut - 1}`)
  } finally {
    if (owned) closeSync(fd)
  }
}

/**
 * Registers `childId` with the log its reference names: an empty file named
 * by the child's directory name. Returns the directory to fsync (the caller
 * makes it durable before the child's log is published).
 */
export function registerDependantSync(root: string, fork: ForkReference, childId: string): string {
  const refs = join(root, encodeSessionDirName(fork.source), 'refs')
  try {
    mkdirSync(refs, { mode: 0o700 })
    fsyncDirSync(dirname(refs))
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw error
    // An existing `refs` must be a real directory: a symbolic link there is refused, never followed out of the root.
    if (!lstatSync(refs).isDirectory()) throw entryRefused(refs, 'the directory of fork registrations')
  }
  const file = join(refs, encodeSessionDirName(childId))
  try {
    closeSync(openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o600))
  } catch (error) {
    if (isErrno(error, 'ELOOP', 'EISDIR')) throw entryRefused(file, 'a fork registration (a regular file)', error)
    throw error
  }
  return refs
}

/** The source must still be the log the reference names, and not in the middle of a delete (its `deleting` marker). */
export function assertReferenceableSync(io: ForkIo, fork: ForkReference, childLabel: string, deletingFile: string): void {
  const gone = (why: string): Error =>
    persistenceError('SESSION_PERSISTENCE_CONFLICT', `Fork ${childLabel} cannot reference session ${labelOf(fork.source)}: ${why}.`, {
      details: { source: fork.source },
    })
  const file = io.logPath(fork.source)
  let marker: string | undefined
  try {
    marker = readFileSync(join(dirname(file), deletingFile), 'utf8')
  } catch (error) {
    if (!isErrno(error, 'ENOENT')) throw error
  }
  if (marker !== undefined && deleterAlive(marker)) throw gone('it is being deleted')
  io.opened()
  const fd = openLogSync(file)
  if (fd === undefined) throw gone('it is not persisted')
  try {
    const { physical } = readHeaderSync(io, fd, fstatSync(fd).size, file)
    if (physical.logId !== fork.logId) throw gone('it was re-created meanwhile')
  } finally {
    closeSync(fd)
  }
}

/** Whether the process that wrote a `deleting` marker (`deletingMarker`) may still be deleting; a marker left by a crashed delete is stale. */
function deleterAlive(marker: string): boolean {
  let owner: Partial<ProcessIdentity>
  try {
    owner = JSON.parse(marker) as Partial<ProcessIdentity>
  } catch {
    return true // unreadable: assume a delete is in progress
  }
  if (typeof owner.host !== 'string' || typeof owner.pid !== 'number') return true
  return isAlive({ host: owner.host, pid: owner.pid, start: typeof owner.start === 'string' ? owner.start : null })
}

/** What a delete writes into the source's `deleting` marker: the process deleting (see `deleterAlive`). */
export function deletingMarker(): string {
  const { host, pid, start } = ownIdentity()
  return JSON.stringify({ host, pid, start })
}

/** Opens a log read-only, never through a symlink (directory or file); `undefined` when absent. */
function openLogSync(file: string): number | undefined {
  try {
    if (!lstatSync(dirname(file)).isDirectory()) throw corrupt(dirname(file), 0, 'not a session directory (a symbolic link or a file)')
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    throw error
  }
  let fd: number
  try {
    // O_NONBLOCK: a FIFO where the log should be is refused below instead of waiting for a writer.
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    if (isErrno(error, 'ELOOP', 'EISDIR', 'EACCES'))
      throw corrupt(file, 0, `the log cannot be opened as a regular file (${(error as NodeJS.ErrnoException).code})`)
    throw error
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd)
    throw corrupt(file, 0, 'the log is not a regular file')
  }
  return fd
}

function readHeaderSync(io: ForkIo, fd: number, size: number, file: string): { physical: PhysicalHeader; headerEnd: number } {
  let length = Math.min(size, 512)
  for (;;) {
    const buf = readExact(io, fd, 0, length, true)
    const unit = locateHeader(buf, io.codec, file, buf.length >= size)
    if (unit === 'more') {
      length = Math.min(size, length * 4)
      continue
    }
    let plain: Buffer
    try {
      plain = io.codec.decodeBodySync(buf.subarray(unit.bodyStart, unit.bodyEnd))
    } catch (error) {
      throw corrupt(file, 0, `the header unit does not decode (${(error as Error).message})`)
    }
    if (plain.length !== unit.trailer.plainLength || crc32(plain) !== unit.trailer.plainCrc)
      throw corrupt(file, 0, 'the header unit fails its CRC32')
    return { physical: physicalHeaderOf(plain, file), headerEnd: unit.bodyEnd + io.codec.trailer.size }
  }
}

function readExact(io: ForkIo, fd: number, position: number, length: number, header = false): Buffer {
  const out = Buffer.allocUnsafe(length)
  let done = 0
  while (done < length) {
    const n = readSync(fd, out, done, length - done, position + done)
    if (n === 0) break
    done += n
  }
  io.counted(done, header)
  return done === length ? out : out.subarray(0, done)
}
