import { constants, promises as fsp } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import type { DeleteOptions } from '@dsh/session-persistence'
import { persistenceError } from '@dsh/session-persistence/backend'
import { type AttachmentFiles, removeAttachments } from './attachments.js'
import { encodeBatchUnit } from './bulk-append.js'
import { entryRefused, ioError, labelOf } from './errors.js'
import { MAX_FORK_DEPTH } from './fork-prefix.js'
import {
  checkCutSource,
  deletingMarker,
  type ForkIo,
  forkChainTooDeep,
  type LocatedCut,
  locateCutSync,
  sourceNotPersisted,
} from './fork-refs.js'
import { fsyncDir, isErrno, revisionOf, tempSibling, writeAt } from './fs-io.js'
import { encodeSessionDirName, isSessionDirName } from './id-encoding.js'
import type { LogContext } from './log-context.js'
import { encodeHeaderLine, newLogId, type PhysicalHeader } from './log-format.js'
import { corrupt, decodeHeader, scanLog } from './log-scan.js'
import { encodeUnit } from './log-units.js'
import { PaddedTail } from './padded-tail.js'
import { DELETING_FILE, LOCK_FILE, REFS_DIR, removeSessionDir, type Writer } from './session-writer.js'
import { liveHolder, WriterLock } from './writer-lock.js'
import type { WriterPool } from './writers.js'

/**
 * Forks stored by reference, and deleting the sessions they reference.
 *
 * A fork's log names the committed prefix of its source it inherits
 * (`ForkReference`) and registers itself in the source's `refs/` before it
 * is published. So a delete of a source first looks for dependants that
 * still reference this lifecycle of it: it refuses (`REFERENCED`), or
 * rewrites each as a self-contained log first (`materializeDependants`).
 */
export class Forks {
  readonly #ctx: LogContext
  readonly #writers: WriterPool
  readonly #attachments: AttachmentFiles

  constructor(ctx: LogContext, writers: WriterPool, attachments: AttachmentFiles) {
    this.#ctx = ctx
    this.#writers = writers
    this.#attachments = attachments
  }

  /** What the synchronous fork helpers need (see `fork-refs.ts`). */
  get io(): ForkIo {
    const { root, codec, metrics } = this.#ctx
    return {
      root,
      codec,
      logPath: (id) => this.#ctx.reader.logPath(id),
      live: (id) => {
        const w = this.#writers.get(id)
        return w === undefined
          ? undefined
          : { fd: w.handle.fd, physical: w.physical, headerEnd: w.headerEnd, committedEnd: w.tail.committedEnd, nextSeq: w.nextSeq }
      },
      opened: () => {
        metrics.logOpens++
      },
      counted: (bytes, header) => {
        metrics.bytesRead += bytes
        if (header) metrics.headerReads++
      },
    }
  }

  /**
   * The reference to events `[0, cut)` of `sourceId`: on the calling thread
   * (`locateCutSync`), or, when the source's tail is not a clean batch, by
   * scanning its log.
   */
  async locateCut(sourceId: string, cut: number): Promise<LocatedCut> {
    return locateCutSync(this.io, sourceId, cut, MAX_FORK_DEPTH) ?? (await this.#locateCutScanned(sourceId, cut, 0))
  }

  /**
   * Whether a fork may reference the cut it located. A read of a fork
   * follows its reference and every reference above the referenced log, at
   * most `MAX_FORK_DEPTH` of them; a fork that would need more stores its
   * prefix itself (`inheritAttachments` then gives it its own attachments).
   * Reads one header per reference above the referenced log, none for a
   * fork of a session that is no fork.
   */
  async referenceable(located: LocatedCut): Promise<boolean> {
    const { reader } = this.#ctx
    let above = located.above
    for (let references = 1; references <= MAX_FORK_DEPTH; references++) {
      if (above === undefined) return true
      const holder = above.source
      above = (this.#writers.get(holder)?.physical ?? (await reader.readPhysicalAt(reader.logPath(holder))))?.fork
    }
    return false
  }

  /** Links every attachment `childId` reads through `sourceId` (and its chain) into the child's own files. */
  inheritAttachments(childId: string, sourceId: string): Promise<void> {
    return this.#attachments.inherit(childId, sourceId)
  }

  /**
   * `locateCut` for a source whose tail needs a scan: the log physically
   * holding event `cut - 1` (an ancestor when the cut lies in the source's
   * own inherited prefix), the end of the batch holding it and that batch's
   * trailer CRC. Reads the source's header and the trailers of the batches
   * after the cut — never the prefix itself.
   */
  async #locateCutScanned(sourceId: string, cut: number, depth: number, expectLogId?: string): Promise<LocatedCut> {
    const { codec, metrics, reader } = this.#ctx
    if (depth > MAX_FORK_DEPTH) throw forkChainTooDeep(sourceId)
    const live = this.#writers.get(sourceId)
    const file = reader.logPath(sourceId)
    let handle: FileHandle
    let source: { physical: PhysicalHeader; headerEnd: number; committedEnd: number; nextSeq: number }
    if (live !== undefined) {
      handle = live.handle
      source = { physical: live.physical, headerEnd: live.headerEnd, committedEnd: live.tail.committedEnd, nextSeq: live.nextSeq }
    } else {
      const opened = await reader.openForRead(file)
      if (opened === undefined) throw sourceNotPersisted(sourceId)
      handle = opened
    }
    try {
      if (live === undefined) {
        const size = (await handle.stat()).size
        const { buf, unit } = await reader.readHeaderUnit(handle, size, file, false)
        const physical = await decodeHeader(buf, unit, codec, file)
        const headerEnd = unit.bodyEnd + codec.trailer.size
        // Locating the cut needs only where the committed log ends: a valid final trailer says so
        // (a torn write never ends in one). Every read of the fork verifies the prefix in full.
        const tail = await reader.lastTrailer(handle, size, headerEnd)
        if (tail !== undefined) source = { physical, headerEnd, committedEnd: tail.committedEnd, nextSeq: tail.nextSeq }
        else {
          const whole = await reader.countedRead(handle, 0, size, file)
          metrics.bodyReads++
          const scan = await scanLog(whole, codec, file, physical.fork?.cut ?? 0)
          source = { physical, headerEnd, committedEnd: scan.committedEnd, nextSeq: scan.nextSeq }
        }
      }
      const { physical, headerEnd, committedEnd } = source!
      checkCutSource(source!, sourceId, cut, expectLogId, file)
      if (physical.fork !== undefined && cut <= physical.fork.cut)
        return this.#locateCutScanned(physical.fork.source, cut, depth + 1, physical.fork.logId)
      const trailerSize = codec.trailer.size
      let end = committedEnd
      while (end > headerEnd) {
        const trailer = codec.trailer.decode(await reader.countedRead(handle, end - trailerSize, trailerSize), 0)
        if (trailer === undefined || trailer.kind !== 'batch')
          throw corrupt(file, end - trailerSize, 'a batch trailer is missing or damaged')
        if (trailer.firstSeq <= cut - 1 && cut - 1 < trailer.firstSeq + trailer.count) {
          return { reference: { source: sourceId, logId: physical.logId, cut, end, batchCrc: trailer.bodyCrc }, above: physical.fork }
        }
        end -= trailerSize + trailer.bodyLength
      }
      throw corrupt(file, end, `no committed batch holds event ${cut - 1}`)
    } finally {
      if (live === undefined) await handle.close()
    }
  }

  /**
   * Explicit deletion, on the session's chain. A session that forks
   * reference is refused with `SESSION_PERSISTENCE_REFERENCED`, unless
   * `materializeDependants`: then every dependant (and theirs, first) is
   * rewritten to hold its prefix itself before the session goes.
   */
  async delete(id: string, options: DeleteOptions): Promise<boolean> {
    const { root, reader, feed } = this.#ctx
    // A session directory that is a symlink or not a directory is refused, never followed (not even to delete).
    if (this.#writers.get(id) === undefined) await reader.assertSessionDir(join(root, encodeSessionDirName(id)))
    const opened = await this.#writers.open(id, 'existing').catch((error: unknown) => {
      // A log too damaged to open can still be deleted explicitly.
      if (error instanceof Error && (error as { code?: string }).code === 'SESSION_PERSISTENCE_CORRUPT') return 'corrupt' as const
      throw error
    })
    if (opened === 'corrupt') return this.#deleteDamaged(id)
    // 'existing' mode reports a directory without a log as missing (its lock already released).
    if (opened.kind !== 'writer') return false
    const writer = opened.writer
    const { dir, lock } = writer
    const marker = join(dir, DELETING_FILE)
    // The marker names the deleting process: one left by a delete that crashed is recognised as stale (and replaced).
    await writeDeletingMarker(marker, writer.label)
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
        for (const dependant of dependants) await this.#writers.serial(dependant, () => this.#materialize(dependant))
      }
    } catch (error) {
      await fsp.unlink(marker).catch(() => {})
      throw error
    }
    this.#writers.forget(writer)
    await writer.handle.close()
    let existed = true
    try {
      await feed.around(id, async () => {
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
    // No fork references this session any more (each dependant holds links to the attachments it read).
    await removeAttachments(dir)
    await lock.release()
    await removeSessionDir(root, dir)
    return existed
  }

  /** Deletes a log that cannot even be opened for writing (damaged header). Its dependants, if any, are already unreadable. */
  async #deleteDamaged(id: string): Promise<boolean> {
    const { root, codec, feed } = this.#ctx
    const dir = join(root, encodeSessionDirName(id))
    const lock = await WriterLock.acquire(join(dir, LOCK_FILE), labelOf(id))
    const file = join(dir, codec.logFileName)
    try {
      await feed.around(id, async () => {
        try {
          await fsp.unlink(file)
          await fsyncDir(dir)
        } catch (error) {
          // A directory where the log should be is not removed with whatever it holds: a person decides.
          if (isErrno(error, 'EISDIR', 'EPERM')) throw entryRefused(file, 'a session log (a regular file)', error)
          throw ioError(`delete session ${labelOf(id)}`, error)
        }
      })
      await removeAttachments(dir)
    } finally {
      await lock.release()
    }
    await removeSessionDir(root, dir)
    return true
  }

  async #unregisterDependant(sourceId: string, childId: string): Promise<void> {
    await fsp.unlink(join(this.#ctx.root, encodeSessionDirName(sourceId), REFS_DIR, encodeSessionDirName(childId))).catch(() => {})
  }

  /** Dependants that still reference this lifecycle of `id`; stale registrations (a fork never published, or deleted) are removed. */
  async #liveDependants(id: string, logId: string): Promise<string[]> {
    const { root, codec, reader } = this.#ctx
    const refs = join(root, encodeSessionDirName(id), REFS_DIR)
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
      let physical: PhysicalHeader | undefined
      try {
        physical = await reader.readPhysicalAt(join(root, name, codec.logFileName))
      } catch (error) {
        // A dependant whose header is damaged cannot be materialized; it keeps the source (delete it explicitly first).
        throw persistenceError(
          'SESSION_PERSISTENCE_REFERENCED',
          `Session ${labelOf(id)} may be referenced by the fork stored in ${join(root, name)}, whose log cannot be read (${(error as Error).message}); delete that fork explicitly first.`,
          { cause: error, details: { id } },
        )
      }
      if (physical === undefined) {
        // No published log: a fork that never completed — or one whose creator (holding the child's lock) checked
        // this source's `deleting` marker before it was written, and is about to publish. Removing that registration
        // would let the fork appear referencing a deleted source: while its creator lives, the source is kept.
        const creator = await liveHolder(join(root, name, LOCK_FILE))
        if (creator !== undefined) {
          throw persistenceError(
            'SESSION_PERSISTENCE_REFERENCED',
            `Session ${labelOf(id)} is being forked (the fork in ${join(root, name)} is being created by process ${creator.pid} on ${creator.host}); retry the delete once that fork is stored or has failed.`,
            { details: { id, pid: creator.pid, host: creator.host } },
          )
        }
      }
      if (physical?.fork?.source === id && physical.fork.logId === logId) live.push(physical.header.id)
      else await fsp.unlink(join(refs, name)).catch(() => {})
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
    const { codec, metrics, reader, feed } = this.#ctx
    const opened = await this.#writers.open(childId, 'existing')
    if (opened.kind !== 'writer') return
    const writer: Writer = opened.writer
    const fork = writer.physical.fork
    if (fork === undefined) return
    for (const dependant of await this.#liveDependants(childId, writer.physical.logId))
      await this.#writers.serial(dependant, () => this.#materialize(dependant))
    // The attachments it read through the reference become its own (hard links, no bytes copied).
    await this.#attachments.inherit(childId, fork.source)
    const own = await reader.readOwnFrom(writer.handle, writer.file, writer.tail.committedEnd, undefined)
    const events = await reader.joinedEvents(own, writer.file, undefined)
    const physical: PhysicalHeader = {
      header: writer.physical.header,
      inheritedEventCount: writer.physical.inheritedEventCount,
      logId: newLogId(),
    }
    const headerLine = encodeHeaderLine(physical)
    const headerUnit = encodeUnit(codec, headerLine, 'header', 0, 0)
    const data = Buffer.concat(events.length > 0 ? [headerUnit, ...(await encodeBatchUnit(codec, events, 0))] : [headerUnit])
    const temp = tempSibling(writer.file)
    const tempHandle = await fsp.open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      await writeAt(tempHandle, data, 0)
      await tempHandle.sync()
    } finally {
      await tempHandle.close()
    }
    await feed.around(childId, async () => {
      try {
        await fsp.rename(temp, writer.file)
        await fsyncDir(writer.dir)
      } catch (error) {
        await fsp.unlink(temp).catch(() => {})
        throw ioError(`materialize fork ${writer.label}`, error)
      }
    })
    await writer.handle.close()
    metrics.logOpens++
    writer.handle = await fsp.open(writer.file, constants.O_RDWR)
    writer.physical = physical
    writer.headerCrc = crc32(headerLine)
    writer.headerEnd = headerUnit.length
    const stats = await writer.handle.stat()
    writer.tail = PaddedTail.unpadded(stats.ino, data.length)
    writer.revision = revisionOf(writer.headerCrc, stats)
    await this.#unregisterDependant(fork.source, childId)
  }
}

/**
 * Writes a `deleting` marker, never through a link: a symbolic link planted
 * there is refused at the open (O_NOFOLLOW), a hard link or anything but a
 * regular file before a byte is written (it is truncated only once checked),
 * and whatever it names is not touched.
 */
async function writeDeletingMarker(marker: string, label: string): Promise<void> {
  const what = 'a deletion marker (a regular file of this session)'
  let handle: FileHandle
  try {
    handle = await fsp.open(marker, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600)
  } catch (error) {
    if (isErrno(error, 'ELOOP', 'EISDIR', 'ENXIO')) throw entryRefused(marker, what, error)
    throw ioError(`mark session ${label} for deletion`, error)
  }
  try {
    const stats = await handle.stat()
    if (!stats.isFile() || stats.nlink !== 1) throw entryRefused(marker, what)
    await handle.truncate(0)
    await handle.writeFile(deletingMarker())
  } catch (error) {
    if ((error as { code?: string }).code === 'SESSION_PERSISTENCE_CORRUPT') throw error
    throw ioError(`mark session ${label} for deletion`, error)
  } finally {
    await handle.close()
  }
}
