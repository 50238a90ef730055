import { fstatSync } from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import type { SessionLogOffset } from '@dsh/session'
import type { AppendResult, AppendTarget } from '@dsh/session-persistence'
import {
  type AppendedEvent,
  appendedEventCount,
  checkAppend,
  expandEventRuns,
  isEventRun,
  persistenceError,
} from '@dsh/session-persistence/backend'
import { encodeBatchUnit } from './bulk-append.js'
import { ioError, labelOf, systemToIo } from './errors.js'
import { assertReferenceableSync, registerDependantSync } from './fork-refs.js'
import type { Forks } from './forks.js'
import { fsyncDir, isErrno, publishNew, revisionOf } from './fs-io.js'
import type { LogContext } from './log-context.js'
import { encodeHeaderLine, type ForkReference, newLogId, type PhysicalHeader } from './log-format.js'
import { encodeUnit } from './log-units.js'
import { PaddedTail } from './padded-tail.js'
import { DELETING_FILE, removeSessionDir, type Writer } from './session-writer.js'
import type { NewLogPlace, WriterPool } from './writers.js'

/** A session's directory and lock, taken for its first append (`OpenedWriter` of kind `absent`). */
/**
 * A session's first append: its header and first batch published together,
 * atomically (`publishNew`), between the change's journal records. With
 * `forkSource`, the log holds a reference to the source's committed prefix
 * (registered with the source first) and only the events after the cut,
 * unless reading it would follow more references than a read may
 * (`Forks.referenceable`): then it holds its prefix too.
 * The batch is checked once (`checkAppend`): as the whole first batch, or,
 * stored by reference, as the continuation from the cut. The new writer is
 * kept open in `writers`; a refused first append leaves nothing behind, not
 * even the directory.
 */
export async function createLog(
  ctx: LogContext,
  writers: WriterPool,
  forks: Forks,
  place: NewLogPlace,
  target: AppendTarget,
  items: readonly AppendedEvent[],
): Promise<AppendResult> {
  const { root, codec, metrics, feed } = ctx
  const { dir, lock, rootSync } = place
  const id = target.header.id
  const label = labelOf(id)
  try {
    const cut = target.inheritedEventCount
    // The batch is sliced at the cut by index (a fork by reference stores only its own events): a batch whose item at
    // cut - 1 is not the event of seq cut - 1 (a run in the inherited prefix, or a bad batch) is taken as its events, as
    // is any batch of a log that does not pack runs. Never a walk of a fork's whole inherited prefix.
    const atCut = items[cut - 1]
    const aligned = cut === 0 || (atCut !== undefined && !isEventRun(atCut) && atCut.seq === cut - 1)
    const events = aligned && codec.packsRuns ? items : expandEventRuns(id, items)
    // Expanded or aligned, item `cut - 1` is the event of seq `cut - 1` in any batch that continues from seq 0; one
    // that does not is checked whole, and refused.
    const byReference =
      target.forkSource !== undefined && target.forkSource !== id && cut > 0 && events.length >= cut && events[cut - 1]?.seq === cut - 1
    // The inherited prefix of a fork by reference is not stored (the source holds it, verified on every read):
    // only the events this log stores are checked, as a continuation from the cut.
    checkAppend(
      target,
      byReference ? events.slice(cut) : events,
      byReference ? { header: target.header, inheritedEventCount: cut, nextSeq: cut } : undefined,
    )
    let fork: ForkReference | undefined
    let registered: Promise<void> | undefined
    const source = byReference ? target.forkSource : undefined
    if (source !== undefined) {
      const located = await forks.locateCut(source, cut)
      if (await forks.referenceable(located)) {
        fork = located.reference
        try {
          // The registration's fsync runs concurrently with the log's write; both are durable before the log is linked.
          registered = fsyncDir(registerDependantSync(root, fork, id))
          registered.catch(() => {})
        } catch (error) {
          if (isErrno(error, 'ENOENT')) {
            throw persistenceError('SESSION_PERSISTENCE_CONFLICT', `The fork source ${labelOf(fork.source)} is not persisted any more.`, {
              details: { id: fork.source },
            })
          }
          if ((error as { code?: string }).code === 'SESSION_PERSISTENCE_CORRUPT') throw error
          throw ioError(`register fork ${label} with its source ${labelOf(fork.source)}`, error)
        }
      } else {
        // A chain too deep to reference: the fork stores its prefix, checked as any first batch is, and links its attachments.
        checkAppend(target, events, undefined)
        await forks.inheritAttachments(id, source)
      }
    }
    const physical: PhysicalHeader = { header: target.header, inheritedEventCount: cut, logId: newLogId(), ...(fork ? { fork } : {}) }
    const own = fork ? events.slice(cut) : events
    const firstSeq = fork ? cut : 0
    const nextSeq = firstSeq + appendedEventCount(own)
    const headerLine = encodeHeaderLine(physical)
    const headerUnit = encodeUnit(codec, headerLine, 'header', 0, 0)
    const parts = [headerUnit]
    if (own.length > 0) {
      const batch = encodeBatchUnit(codec, own, firstSeq, nextSeq - firstSeq)
      parts.push(...(Array.isArray(batch) ? batch : await batch))
    }
    const data = Buffer.concat(parts)
    const file = join(dir, codec.logFileName)
    const handle = await feed.around(id, async () => {
      // A source being deleted, or deleted and re-created, since it was located is not referenced.
      if (fork) assertReferenceableSync(forks.io, fork, label, DELETING_FILE)
      // A full disk or a file size limit (ENOSPC, EFBIG) fails here: nothing was published.
      return publishNew(file, data, Promise.all([rootSync, registered])).catch((error: unknown) => {
        throw systemToIo(`create session ${label} (nothing was stored)`, error)
      })
    })
    if (handle === undefined) {
      throw persistenceError('SESSION_PERSISTENCE_CONFLICT', `Session ${label} was created by another writer meanwhile.`, {
        details: { id },
      })
    }
    metrics.logOpens++
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
      tail: PaddedTail.unpadded(stats.ino, data.length),
      nextSeq,
      acceptedSeq: nextSeq,
      revision,
    }
    writers.remember(writer)
    if (events.length > 0) metrics.appends++
    return { revision, nextSeq: nextSeq as SessionLogOffset }
  } catch (error) {
    if (writers.get(id) === undefined) {
      // Nothing is left behind, not even a directory holding only the lock: its failure to clean up (descriptors or
      // the disk still short) would hide the refusal, so the refusal is what is thrown; a retry completes what stays.
      try {
        await lock.release()
      } catch {
        // A lock file left here is a dead holder's once this process exits: the next writer takes it over.
      }
      await removeSessionDir(root, dir).catch(() => {})
    }
    throw error
  }
}
