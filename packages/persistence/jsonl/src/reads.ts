import { type Dirent, promises as fsp } from 'node:fs'
import { join } from 'node:path'
import { throwIfAborted } from '@dsh/context'
import { compareSessionIds, type SessionId, SessionLogOffset } from '@dsh/session'
import type {
  PersistedSessionRecord,
  SessionObservation,
  SessionRangeObservation,
  SessionRevision,
  SessionSuffixObservation,
} from '@dsh/session-persistence'
import {
  type CheckedRange,
  persistenceCancelled as cancelled,
  rangeBounds,
  SessionPersistenceError,
} from '@dsh/session-persistence/backend'
import { ioError, labelOf, notFound } from './errors.js'
import { revisionOf } from './fs-io.js'
import { decodeSessionDirName, encodeSessionDirName, isSessionDirName } from './id-encoding.js'
import type { LogContext } from './log-context.js'
import type { ForkReference } from './log-format.js'
import { readRange } from './log-range.js'
import type { OwnRead } from './log-reader.js'
import { corrupt, decodeHeader } from './log-scan.js'
import { Slots } from './slots.js'
import type { DamagedLog, LogVerification } from './types.js'

/** A whole log read and checked: what `inspect` returns, and where its committed part ends (`verify`). */
interface LogRead {
  readonly observation: SessionObservation
  readonly committedEnd: number
  /** The file's size less a valid padding frame's bytes: what is past `committedEnd` is a torn tail. */
  readonly size: number
  readonly fork: ForkReference | undefined
}

/**
 * The read operations: `inspect`, `verify`, `inspectFrom`, `inspectRange`,
 * `stat` and `list`. They take no lock and never write: a reader racing a writer sees
 * the committed log before or after a batch, never a part of one.
 */
export class Reads {
  readonly #ctx: LogContext
  readonly #listConcurrency: number
  /** `stat`s holding a log open: at most `listConcurrency`, however many are called at once (one per session of a root). */
  readonly #stats: Slots
  #damaged: readonly DamagedLog[] = []

  constructor(ctx: LogContext, listConcurrency: number) {
    this.#ctx = ctx
    this.#listConcurrency = listConcurrency
    this.#stats = new Slots(listConcurrency)
  }

  /** Logs the last `list()` left out because their header unit is damaged or of an unsupported version. */
  damagedLogs(): readonly DamagedLog[] {
    return this.#damaged
  }

  async inspect(id: SessionId, signal: AbortSignal | undefined): Promise<SessionObservation> {
    return (await this.#readLog(id, signal)).observation
  }

  /**
   * Reads and checks one whole log like `inspect`, and also says how many
   * bytes of torn tail follow the committed batches (what `load` would
   * truncate). For `dsh verify`; never mutates storage.
   */
  async verify(id: SessionId, signal: AbortSignal | undefined): Promise<LogVerification> {
    const { observation, committedEnd, size, fork } = await this.#readLog(id, signal)
    return Object.freeze({
      id,
      events: observation.events.length,
      committedBytes: committedEnd,
      tornBytes: size - committedEnd,
      ...(fork ? { forkSource: fork.source } : {}),
    })
  }

  async #readLog(id: SessionId, signal: AbortSignal | undefined): Promise<LogRead> {
    const { reader } = this.#ctx
    throwIfAborted(signal, cancelled)
    const file = reader.logPath(id)
    const handle = await reader.openForRead(file)
    if (handle === undefined) throw notFound(id)
    let own: OwnRead
    try {
      own = await reader.readOwnFrom(handle, file, undefined, signal)
    } finally {
      await handle.close()
    }
    if (own.physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(own.physical.header.id)}`)
    const events = await reader.joinedEvents(own, file, signal)
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
   * The committed events with `seq >= from`, reading only what proves them
   * (see `inspectRange`). `from` is reported as asked, even past the end.
   */
  async inspectFrom(id: SessionId, from: SessionLogOffset, signal: AbortSignal | undefined): Promise<SessionSuffixObservation> {
    SessionLogOffset(from)
    const { total: _total, ...suffix } = await this.inspectRange(id, { from, to: undefined, limit: undefined }, signal)
    return Object.freeze({ ...suffix, from })
  }

  /**
   * The committed events of a range, reading only what proves them: the
   * header, the last batch (the tail check, which finds the end, the event
   * count and the revision), then the trailers from the end back to the
   * batch holding the range's first event, then the batches holding the
   * range (checked and decoded). Events inside a fork's inherited prefix are
   * read the same way from the source, from the referenced end back; a range
   * of the fork's own events only checks that the source still carries the
   * referenced identity and batch (its header and one trailer). A log whose
   * tail is not a clean batch (a torn append, damage) is read in full.
   */
  async inspectRange(id: SessionId, range: CheckedRange, signal: AbortSignal | undefined): Promise<SessionRangeObservation> {
    const { codec, reader } = this.#ctx
    throwIfAborted(signal, cancelled)
    const file = reader.logPath(id)
    const opened = await reader.openWithStats(file)
    if (opened === undefined) throw notFound(id)
    const { handle, stats } = opened
    let result: SessionRangeObservation | undefined
    try {
      const size = Number(stats.size)
      // The tail check below finds the end and the revision (the same walk as `stat`'s).
      const { buf: headBuf, unit } = await reader.readHeaderUnit(handle, size, file, false)
      const physical = await decodeHeader(headBuf, unit, codec, file)
      if (physical.header.id !== id) throw corrupt(file, 0, `the header names session ${labelOf(physical.header.id)}`)
      const firstSeq = physical.fork?.cut ?? 0
      const headerEnd = unit.bodyEnd + codec.trailer.size
      const tail = await reader.verifyTail(handle, size, headerEnd, firstSeq, file)
      throwIfAborted(signal, cancelled)
      if (tail !== undefined) {
        const { start, end } = rangeBounds(range, tail.nextSeq)
        if (physical.fork && start >= firstSeq) await reader.checkReference(physical.fork, file)
        const span = { handle, file, headerEnd, committedEnd: tail.committedEnd, firstSeq, nextSeq: tail.nextSeq, fork: physical.fork }
        const events = await readRange(reader, span, start, end, signal)
        if (events.length !== end - start) throw corrupt(file, headerEnd, `the batches hold ${events.length} of events ${start}-${end - 1}`)
        result = Object.freeze({
          header: physical.header,
          inheritedEventCount: physical.inheritedEventCount,
          revision: revisionOf(unit.trailer.plainCrc, stats, tail.slot),
          from: SessionLogOffset(start),
          events: Object.freeze(events),
          total: tail.nextSeq,
        })
      }
    } finally {
      await handle.close()
    }
    if (result !== undefined) return result
    const { observation } = await this.#readLog(id, signal)
    const total = observation.events.length
    const { start, end } = rangeBounds(range, total)
    return Object.freeze({
      ...observation,
      from: SessionLogOffset(start),
      events: Object.freeze(observation.events.slice(start, end)),
      total,
    })
  }

  /** The revision, from the log's header unit (its CRC) and file metadata; no body is read. */
  async stat(id: SessionId, signal: AbortSignal | undefined): Promise<SessionRevision | undefined> {
    const { reader } = this.#ctx
    throwIfAborted(signal, cancelled)
    const file = reader.logPath(id)
    return this.#stats.run(async () => {
      throwIfAborted(signal, cancelled)
      const opened = await reader.openWithStats(file)
      if (opened === undefined) return undefined
      const { handle, stats } = opened
      try {
        const { unit, slot } = await reader.readHeaderUnit(handle, Number(stats.size), file)
        throwIfAborted(signal, cancelled)
        return revisionOf(unit.trailer.plainCrc, stats, slot)
      } finally {
        await handle.close()
      }
    })
  }

  /**
   * Header-only records of every persisted session: reads each log's header
   * unit and nothing else. One log whose header cannot be read must not
   * hide every other session: it is left out of the listing and reported
   * through `damagedLogs()` (and `dsh verify`), never dropped silently.
   */
  async list(signal: AbortSignal | undefined): Promise<PersistedSessionRecord[]> {
    const { root } = this.#ctx
    throwIfAborted(signal, cancelled)
    let entries: Dirent[]
    try {
      entries = await fsp.readdir(root, { withFileTypes: true })
    } catch (error) {
      throw ioError(`read the root ${root}`, error)
    }
    const names = entries.filter((e) => e.isDirectory() && isSessionDirName(e.name)).map((e) => e.name)
    const records: PersistedSessionRecord[] = []
    // Entries named like sessions that are not directories (a symlink, a foreign file) are damaged entries, never followed.
    const damaged: DamagedLog[] = entries
      .filter((entry) => !entry.isDirectory() && isSessionDirName(entry.name))
      .map((entry) => {
        const dir = join(root, entry.name)
        const reason = entry.isSymbolicLink()
          ? 'a symbolic link (never followed out of the root)'
          : entry.isFile()
            ? 'a file, not a session directory'
            : 'not a session directory'
        return Object.freeze({
          dir,
          id: decodeSessionDirName(entry.name),
          code: 'SESSION_PERSISTENCE_CORRUPT' as const,
          message: `${dir} is ${reason}.`,
        })
      })
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < names.length) {
        throwIfAborted(signal, cancelled)
        const name = names[next++]!
        try {
          const record = await this.#readRecord(name)
          if (record !== undefined) records.push(record)
        } catch (error) {
          if (
            !(error instanceof SessionPersistenceError) ||
            (error.code !== 'SESSION_PERSISTENCE_CORRUPT' &&
              error.code !== 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' &&
              error.code !== 'SESSION_PERSISTENCE_IO')
          )
            throw error
          damaged.push(Object.freeze({ dir: join(root, name), id: decodeSessionDirName(name), code: error.code, message: error.message }))
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#listConcurrency, names.length) }, worker))
    throwIfAborted(signal, cancelled)
    this.#damaged = Object.freeze(damaged.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0)))
    return records.sort((a, b) => compareSessionIds(a.header.id, b.header.id))
  }

  async #readRecord(name: string): Promise<PersistedSessionRecord | undefined> {
    const { root, codec, reader } = this.#ctx
    const file = join(root, name, codec.logFileName)
    // A directory without a published log is a creation that never completed (or a delete in progress): not persisted.
    const opened = await reader.openWithStats(file)
    if (opened === undefined) return undefined
    const { handle, stats } = opened
    try {
      const { buf, unit, slot } = await reader.readHeaderUnit(handle, Number(stats.size), file)
      const physical = await decodeHeader(buf, unit, codec, file)
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
}
