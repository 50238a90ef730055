import { constants, promises as fsp, lstatSync, mkdirSync, rmdirSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import type { SessionRevision } from '@dsh/session-persistence'
import { SessionPersistenceError } from '@dsh/session-persistence/backend'
import { ioError, labelOf } from './errors.js'
import { fsyncDir, isErrno, isLiveTemp, revisionOf } from './fs-io.js'
import { encodeSessionDirName } from './id-encoding.js'
import type { LogContext } from './log-context.js'
import type { PhysicalHeader } from './log-format.js'
import { corrupt, decodeHeader, scanLog } from './log-scan.js'
import { PaddedTail } from './padded-tail.js'
import { WriterLock } from './writer-lock.js'

/** The session's cross-process writer lock (`writer-lock.ts`). */
export const LOCK_FILE = 'writer.lock'
/** Dependants (forks stored by reference) register here, one file per child, before their log is published. */
export const REFS_DIR = 'refs'
/** Present while a delete of the session is deciding; a fork does not reference a session being deleted. */
export const DELETING_FILE = 'deleting'

/** What a resumed or appended-to session keeps between appends: the held lock, the open log and where it ends. */
export interface Writer {
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
  /** Where the log ends (committed, padding, end slots); replaced only by its own transitions. */
  tail: PaddedTail
  /** The seq after the last committed batch. */
  nextSeq: number
  /**
   * The seq after every batch accepted for this writer: checked and queued,
   * committed or not yet. The next accepted batch must start here; a batch
   * whose turn comes when `nextSeq` is not where it starts (a batch before it
   * failed) is refused then.
   */
  acceptedSeq: number
  /** The log's current revision; only this writer changes the file while it holds the lock. */
  revision: SessionRevision
}

export type OpenedWriter =
  | { readonly kind: 'writer'; readonly writer: Writer; readonly truncated: boolean }
  /** No log yet (`create` mode): the directory and the lock are held; `rootSync` makes the directory's entry durable. */
  | { readonly kind: 'absent'; readonly dir: string; readonly lock: WriterLock; readonly rootSync: Promise<void> }
  | { readonly kind: 'missing' }

/**
 * Takes the session's lock and opens its log for appending. Verifies the
 * header unit and the last committed batch with its trailer — not the whole
 * log (full verification stays in `inspect`, `load` and `verify`). When the
 * tail is not a complete batch (a crashed writer's torn tail, or damage),
 * the whole log's structure is checked and a torn tail truncated (nothing
 * committed is touched), so appends always continue a committed log.
 * `create` mode makes the session's directory when there is none.
 */
export async function openWriter(ctx: LogContext, id: string, mode: 'create' | 'existing'): Promise<OpenedWriter> {
  const { root, codec, metrics, reader } = ctx
  const label = labelOf(id)
  const dir = join(root, encodeSessionDirName(id))
  await reader.assertSessionDir(dir)
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
        rootSync = fsyncDir(root)
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
      if (createdDir) await removeSessionDir(root, dir).catch(() => {})
      if (error instanceof SessionPersistenceError) throw error
      throw ioError(`lock session ${label}`, error)
    }
  }
  const file = join(dir, codec.logFileName)
  let handle: FileHandle
  try {
    metrics.logOpens++
    // A directory this call just created holds a log only if another writer took the lock first and published one:
    // probe synchronously (an ENOENT from the thread pool costs a round trip, a time slice on a busy machine).
    if (createdDir) lstatSync(file)
    handle = await fsp.open(file, constants.O_RDWR | constants.O_NOFOLLOW)
  } catch (error) {
    if (isErrno(error, 'ENOENT')) {
      if (mode === 'create') {
        // A directory left by a create that crashed before publishing: make its entry durable before the log goes in.
        rootSync ??= fsyncDir(root)
        const synced = rootSync.catch((error: unknown) => {
          throw ioError(`make the directory of session ${label} durable`, error)
        })
        synced.catch(() => {})
        return { kind: 'absent', dir, lock, rootSync: synced }
      }
      await lock.release()
      return { kind: 'missing' }
    }
    // The open's failure is what is reported (typed below), not a failure to remove the lock file.
    await lock.release().catch(() => {})
    if (createdDir) await removeSessionDir(root, dir).catch(() => {})
    if (isErrno(error, 'ELOOP', 'EISDIR', 'EACCES'))
      throw corrupt(file, 0, `the log cannot be opened as a regular file (${(error as NodeJS.ErrnoException).code})`)
    throw ioError(`open the log of session ${label}`, error)
  }
  try {
    const writer = await verifiedWriter(ctx, { id, label, dir, file, lock, handle })
    return { kind: 'writer', ...writer }
  } catch (error) {
    await handle.close().catch(() => {})
    await lock.release().catch(() => {})
    throw error
  }
}

/** The writer of an opened log: its header checked, its tail verified (or the whole log scanned and a torn tail truncated). */
async function verifiedWriter(
  { codec, metrics, reader, feed }: LogContext,
  opened: Pick<Writer, 'id' | 'label' | 'dir' | 'file' | 'lock' | 'handle'>,
): Promise<{ writer: Writer; truncated: boolean }> {
  const { id, file, handle } = opened
  const size = (await handle.stat()).size
  // The tail check below finds the end (and the revision) itself.
  const { buf: headBuf, unit } = await reader.readHeaderUnit(handle, size, file, false)
  const physical = await decodeHeader(headBuf, unit, codec, file)
  if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
  const headerEnd = unit.bodyEnd + codec.trailer.size
  const firstSeq = physical.fork?.cut ?? 0
  let tail = await reader.verifyTail(handle, size, headerEnd, firstSeq, file)
  let truncated = false
  if (tail === undefined) {
    // Not a clean tail: check the whole log's structure (lengths, seqs,
    // CRC32 of every stored unit) to tell a torn tail from damage.
    const buf = await reader.countedRead(handle, 0, size, file)
    metrics.bodyReads++
    const scan = await scanLog(buf, codec, file, firstSeq)
    // Padding after a torn or unconfirmed tail goes with it (the next append grows it again).
    const end = scan.committedEnd
    tail = { committedEnd: end, nextSeq: scan.nextSeq, fileEnd: end, generation: 0, checkpoint: end, slot: undefined }
    if (end < size) {
      // A torn tail left by a crashed writer: never committed, so removing it loses nothing.
      await feed.around(id, async () => {
        await handle.truncate(end)
        await handle.sync()
      })
      truncated = true
    }
  } else {
    metrics.tailVerifications++
  }
  const headerCrc = unit.trailer.plainCrc
  const stats = await handle.stat()
  const writer: Writer = {
    ...opened,
    physical,
    headerCrc,
    headerEnd,
    tail: PaddedTail.found(stats.ino, tail),
    nextSeq: tail.nextSeq,
    acceptedSeq: tail.nextSeq,
    revision: revisionOf(headerCrc, stats, tail.slot),
  }
  return { writer, truncated }
}

/**
 * Removes a session's directory once its log is gone (or was never
 * published), with what may be left in it: temporary files of crashed
 * writers (never those of a live process: a writer that took the lock
 * meanwhile may be about to link its log), the deletion marker and
 * dependants' registrations. A lock taken meanwhile stays, and keeps the
 * directory.
 */
export async function removeSessionDir(root: string, dir: string): Promise<void> {
  try {
    // An empty directory (a create that failed cleanly) goes without a listing: no descriptor, even when none is left.
    let empty = true
    try {
      rmdirSync(dir)
    } catch (error) {
      if (!isErrno(error, 'ENOTEMPTY', 'EEXIST')) throw error
      empty = false
    }
    if (!empty) {
      for (const name of await fsp.readdir(dir)) {
        if (name.startsWith('.') && name.includes('.tmp-')) {
          if (!isLiveTemp(name)) await fsp.unlink(join(dir, name)).catch(() => {})
        } else if (name === DELETING_FILE) await fsp.unlink(join(dir, name)).catch(() => {})
        else if (name === REFS_DIR) await fsp.rm(join(dir, name), { recursive: true, force: true }).catch(() => {})
      }
      await fsp.rmdir(dir)
    }
    await fsyncDir(root)
  } catch (error) {
    if (!isErrno(error, 'ENOENT', 'ENOTEMPTY', 'EEXIST')) throw ioError(`remove ${dir}`, error)
  }
}
