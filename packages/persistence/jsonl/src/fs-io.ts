import { constants as bufferConstants } from 'node:buffer'
import {
  closeSync,
  constants,
  fdatasync,
  fdatasyncSync,
  promises as fsp,
  fsync,
  fsyncSync,
  linkSync,
  openSync,
  type Stats,
  unlinkSync,
  write,
  writeSync,
  writev,
  writevSync,
} from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { persistenceError } from '@dsh/session-persistence/backend'
import { ownTag, tagAlive } from './process-identity.js'

export function isErrno(error: unknown, ...codes: string[]): error is NodeJS.ErrnoException {
  return typeof error === 'object' && error !== null && codes.includes((error as NodeJS.ErrnoException).code ?? '')
}

/**
 * The most bytes one read returns: Node's largest Buffer (4 GiB on 64-bit
 * Node 20). A log larger than this cannot be read whole (`inspect`,
 * `verify`, `load`, or an append that must scan it); reads of a range of it
 * read only the batches they need.
 */
export const READ_MAX_BYTES = bufferConstants.MAX_LENGTH

/**
 * Reads `length` bytes at `position`; fewer only at end of file. A length
 * over `READ_MAX_BYTES` is refused with `SESSION_PERSISTENCE_IO`
 * (`details.limit`) before anything is allocated; `file` names what is read
 * in the message.
 */
export async function readAt(handle: FileHandle, position: number, length: number, file?: string): Promise<Buffer> {
  if (length > READ_MAX_BYTES) throw readTooLarge(length, file)
  const out = Buffer.allocUnsafe(length)
  let done = 0
  while (done < length) {
    const { bytesRead } = await handle.read(out, done, length - done, position + done)
    if (bytesRead === 0) break
    done += bytesRead
  }
  return done === length ? out : out.subarray(0, done)
}

function readTooLarge(length: number, file: string | undefined): Error {
  const what = file === undefined ? 'a file' : `the session log ${file}`
  return persistenceError(
    'SESSION_PERSISTENCE_IO',
    `Could not read ${what} whole: ${length} bytes is more than one read can hold (${READ_MAX_BYTES} bytes). The session is too large to read, verify or load whole; read it in ranges (inspectRange, inspectFrom), or fork it at a later cut and continue there.`,
    { details: { ...(file === undefined ? {} : { file }), bytes: length, limit: READ_MAX_BYTES } },
  )
}

/** Writes all of `data` at `position` (short writes are continued). */
export async function writeAt(handle: FileHandle, data: Buffer, position: number): Promise<void> {
  let done = 0
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done)
    done += bytesWritten
  }
}

/** Makes a directory entry change (create, link, unlink, rename) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  // Opening and closing a directory are cheap system calls: made synchronously, only the fsync
  // waits on the thread pool (each round trip costs a time slice on a busy machine).
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY)
  try {
    await fsyncFd(fd)
  } finally {
    closeSync(fd)
  }
}

/** `fsyncDir` on the calling thread (a directory created once, when a root or a fork's `refs/` is created). */
export function fsyncDirSync(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY)
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * `n` random bytes as hex. node:crypto is loaded at the first call (a write),
 * not when a listing imports this module: it costs a new process ~2.5 ms.
 */
export function randomHex(n: number): string {
  return process.getBuiltinModule('node:crypto').randomBytes(n).toString('hex')
}

/**
 * A unique sibling name for temporary files, naming this process
 * (`ownTag`): `.<name>.tmp-<pid>.<start>-<random>`. It never matches a
 * session directory name (it has a dot).
 */
export function tempSibling(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${ownTag()}-${randomHex(6)}`)
}

/**
 * Whether the temporary file `name` (from `tempSibling`) belongs to a process
 * that is still running — this one included (another backend over the same
 * root) — which may be about to link it, so it must not be removed.
 * Publishers remove their own temporary files whatever happens.
 */
export function isLiveTemp(name: string): boolean {
  const at = name.indexOf('.tmp-')
  if (at === -1) return false
  return tagAlive(name.slice(at + 5).split('-')[0] ?? '')
}

/**
 * Publishes `data` at `path` atomically and without overwriting: written to a
 * temporary file, fsynced, hard-linked into place (`link` fails with EEXIST
 * instead of replacing), then the directory is fsynced. `beforeLink` (e.g.
 * other directories' fsyncs) is awaited after the temporary file is durable
 * and before it is linked; its rejection is observed whatever fails first,
 * never left unhandled. Returns a handle open for reading and writing on
 * the published file — opened on the temporary name while the fsync runs, so
 * the caller's writer needs no reopen after the link — or `undefined` when
 * `path` already exists.
 *
 * Every descriptor it needs (the directory's, the temporary file's, the
 * handle) is open before the link: running out of descriptors (EMFILE)
 * fails before anything is published, never between the link and the
 * directory's fsync.
 */
export async function publishNew(path: string, data: Buffer, beforeLink?: Promise<unknown>): Promise<FileHandle | undefined> {
  beforeLink?.catch(() => {}) // awaited below, unless something fails first
  // Creating, linking and unlinking a small file are cheap system calls, made
  // synchronously; only the fsyncs and the handle's open wait on the thread pool.
  const dirFd = openSync(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY)
  const temp = tempSibling(path)
  let fd: number
  try {
    fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
  } catch (error) {
    closeSync(dirFd)
    throw error
  }
  const handle = fsp.open(temp, constants.O_RDWR)
  handle.catch(() => {}) // awaited below; a failed open must not count as unhandled meanwhile
  let published = false
  try {
    try {
      if (data.length > SYNC_WRITE_MAX) await writeAllAsync(fd, data)
      else for (let done = 0; done < data.length; ) done += writeSync(fd, data, done, data.length - done, done)
      await fsyncFd(fd)
    } finally {
      closeSync(fd)
      // Whatever must be durable before the file appears (run concurrently with its write and fsync).
      await beforeLink
    }
    await handle
    try {
      linkSync(temp, path)
    } catch (error) {
      if (isErrno(error, 'EEXIST')) return undefined
      throw error
    }
    await fsyncFd(dirFd)
    published = true
    return await handle
  } finally {
    closeSync(dirFd)
    try {
      unlinkSync(temp)
    } catch {
      // already gone
    }
    // Not published (exists, or failed): the handle, if it opened, is of a file no one will write.
    if (!published) await handle.then((h) => h.close()).catch(() => {})
  }
}

/** Writes all of `data` from offset 0 on the thread pool (large files). */
function writeAllAsync(fd: number, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (done: number): void => {
      if (done >= data.length) {
        resolve()
        return
      }
      write(fd, data, done, data.length - done, done, (error, written) => (error ? reject(error) : step(done + written)))
    }
    step(0)
  })
}

/** Where a padded log's committed part ends, found from its newest end slot (see `log-padding.ts`): the revision of such a log. */
export interface RevisionSlot {
  /** The committed end. */
  readonly end: number
  /** The CRC32 the last batch's trailer carries (it covers that batch's body CRC). */
  readonly trailerCheck: number
  /**
   * Whether the walk from the slot reached an intact padding frame starting
   * at `end` and reaching the end of the file. When not — a torn or damaged
   * tail, or an append in flight — `end` is the slot's, and the log may hold
   * batches past it.
   */
  readonly settled: boolean
}

/**
 * The opaque revision of a log file. The header CRC — covering a random
 * per-log id — keeps a deleted and re-created session from repeating a
 * revision even when the inode number is reused. Within one log the file only
 * grows (appends) or shrinks back (truncating a torn or failed batch), so
 * for a log without padding size and modification time change with every
 * durable change. A padded log does not change size when
 * appended to, and its modification time is neither durable (fdatasync) nor
 * finer than the kernel's clock tick, so its revision is the newest end
 * slot's walk instead (`slot`, see `log-tail.ts`): the committed end and
 * the last trailer's CRC — what the log holds, not when it was written — with
 * the inode and size (a writer knows all of them without a `stat`).
 *
 * A stale slot (`settled: false`) may sit behind a batch it does not name, so
 * its revision must differ from the one the writer returned for that slot
 * (followers then read the log again): the slot's form, then `~` and the
 * modification time — no other form holds a `~`, and the stale slot and the
 * mtime keep two unsettled states of one log apart.
 */
export function revisionOf(headerCrc: number, stats: Pick<Stats, 'ino' | 'size' | 'mtimeMs'>, slot?: RevisionSlot): string {
  if (slot !== undefined) {
    const padded = paddedRevisionOf(headerCrc, stats.ino, stats.size, slot)
    return slot.settled ? padded : `${padded}~${stats.mtimeMs}`
  }
  // mtimeMs keeps sub-microsecond precision; kernel file times tick far more coarsely.
  return `${(headerCrc >>> 0).toString(36)}.${stats.ino.toString(36)}.${stats.size.toString(36)}.${stats.mtimeMs}`
}

/** The revision of a padded log whose newest slot is settled (see `revisionOf`): what a writer computes from the slot it wrote. */
export function paddedRevisionOf(headerCrc: number, ino: number, size: number, slot: Pick<RevisionSlot, 'end' | 'trailerCheck'>): string {
  return `${(headerCrc >>> 0).toString(36)}.${ino.toString(36)}.${size.toString(36)}.${slot.end.toString(36)}.${(slot.trailerCheck >>> 0).toString(36)}`
}

// The append path uses the callback API on the raw descriptor: each durable
// append is a few system calls, and the promise wrappers of FileHandle cost
// measurably more CPU per call than the calls themselves save.

/** Batches up to this size are written synchronously: a copy into the page cache costs less than a thread-pool round trip. */
export const SYNC_WRITE_MAX = 256 * 1024

/** Writes all of `parts` at `position` on the calling thread (small writes: see `SYNC_WRITE_MAX`). */
export function writevAtSync(fd: number, parts: readonly Buffer[], position: number): void {
  let buffers = parts
  let at = position
  while (buffers.length > 0) {
    const written = writevSync(fd, buffers, at)
    at += written
    buffers = remainder(buffers, written)
  }
}

/** Writes all of `parts` at `position` with as few `writev` calls as possible. */
export function writevAt(fd: number, parts: readonly Buffer[], position: number): Promise<void> {
  if (parts.reduce((n, p) => n + p.length, 0) <= SYNC_WRITE_MAX) {
    try {
      writevAtSync(fd, parts, position)
      return Promise.resolve()
    } catch (error) {
      return Promise.reject(error as Error)
    }
  }
  return new Promise((resolve, reject) => {
    const step = (buffers: readonly Buffer[], at: number): void => {
      writev(fd, buffers, at, (error, written) => {
        if (error) return reject(error)
        let rest = written
        const remaining: Buffer[] = []
        for (const buffer of buffers) {
          if (rest >= buffer.length) rest -= buffer.length
          else {
            remaining.push(rest > 0 ? buffer.subarray(rest) : buffer)
            rest = 0
          }
        }
        if (remaining.length === 0) resolve()
        else step(remaining, at + written)
      })
    }
    step(parts, position)
  })
}

/** What is left of `buffers` after `written` bytes. */
function remainder(buffers: readonly Buffer[], written: number): Buffer[] {
  let rest = written
  const out: Buffer[] = []
  for (const buffer of buffers) {
    if (rest >= buffer.length) rest -= buffer.length
    else {
      out.push(rest > 0 ? buffer.subarray(rest) : buffer)
      rest = 0
    }
  }
  return out
}

export function fsyncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (error) => (error ? reject(error) : resolve())))
}

/**
 * Makes bytes appended to `fd` durable with `fdatasync`: it flushes the data
 * and the metadata needed to read it back — the new size included — but not
 * the modification time (fdatasync(2)); SQLite's unix VFS syncs the same way.
 *
 * `inline` syncs on the calling thread, as SQLite does: it saves the
 * thread-pool round trip (a time slice on a busy machine) but holds the event
 * loop for the flush. The caller asks for it only for a small batch when no
 * other append of the backend is in flight; appends of several sessions at
 * once sync on the pool, where their flushes overlap.
 */
export function fdatasyncFd(fd: number, inline: boolean): Promise<void> {
  if (inline) {
    try {
      fdatasyncSync(fd)
      return Promise.resolve()
    } catch (error) {
      return Promise.reject(error as Error)
    }
  }
  return new Promise((resolve, reject) => fdatasync(fd, (error) => (error ? reject(error) : resolve())))
}
