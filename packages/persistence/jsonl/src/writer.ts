import { fstatSync, type Stats } from 'node:fs'
import { throwIfAborted } from '@dsh/context'
import type { SessionId, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import type { AppendResult, AppendTarget, LoadedSession } from '@dsh/session-persistence'
import {
  type AppendedEvent,
  appendedEventCount,
  persistenceCancelled as cancelled,
  checkAppend,
  expandEventRuns,
  persistenceError,
  type SessionRepairs,
} from '@dsh/session-persistence/backend'
import { encodeBatchUnit } from './bulk-append.js'
import { createLog } from './create-log.js'
import { notFound } from './errors.js'
import type { Forks } from './forks.js'
import { fdatasyncFd, revisionOf, SYNC_WRITE_MAX, writevAt } from './fs-io.js'
import type { LogContext } from './log-context.js'
import type { PaddedWrite } from './log-padding.js'
import type { Writer } from './session-writer.js'
import type { WriterPool } from './writers.js'

/** A batch checked and encoded for a writer's log, waiting for its turn. */
interface Batch {
  /** Where it starts: the writer's `acceptedSeq` when it was accepted. */
  readonly firstSeq: number
  readonly count: number
  /** `[body, trailer]`, or their encoding on the pool (large batches); absent for an empty batch. */
  readonly unit: [Buffer, Buffer] | Promise<[Buffer, Buffer]> | undefined
}

/**
 * The append path. Every append is checked once (`checkAppend`) and
 * encoded, then written and synced in its turn on the session's chain:
 *
 * - A batch that continues a session whose writer is open (no open of it
 *   queued) is checked and encoded when `append` is called, against the
 *   state the log has when its turn comes (`Writer.acceptedSeq`: the seq
 *   after every batch accepted before it). Its lines are serialised then —
 *   and, when large, compressed on the pool while an earlier batch syncs —
 *   so changing its events after the call changes nothing. In its turn, a
 *   batch whose writer was closed meanwhile (the session deleted) or whose
 *   first seq is not the log's next (a batch before it failed) is refused.
 * - Any other append waits for its turn, opens the writer (or creates the
 *   log: `createLog`), and is checked and encoded there.
 *
 * A lone small batch syncs inline (`fdatasyncSync`, no thread-pool round
 * trip); batches of several sessions in flight at once, and large ones,
 * sync on the pool, where their flushes overlap.
 */
export class Appender {
  readonly #ctx: LogContext
  readonly #writers: WriterPool
  readonly #forks: Forks
  readonly #clock: () => number
  readonly #repairs: SessionRepairs
  /** Batches being written (any session): a batch syncs inline only when it is the only one. */
  #batchesInFlight = 0
  /** Appends of each session that wait for their turn to open its writer: appends behind them are checked in turn too. */
  readonly #opening = new Map<string, number>()

  constructor(ctx: LogContext, writers: WriterPool, forks: Forks, clock: () => number, repairs: SessionRepairs) {
    this.#ctx = ctx
    this.#writers = writers
    this.#forks = forks
    this.#clock = clock
    this.#repairs = repairs
  }

  /** Appends `events` to the session `target` names (arguments already validated by the caller). */
  append(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    const id = target.header.id
    const writer = this.#opening.has(id) ? undefined : this.#writers.live(id)
    if (writer === undefined) return this.#appendOpening(target, events)
    let batch: Batch
    try {
      batch = this.#accept(writer, target, events)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#writers.serial(id, () => this.#commit(writer, batch))
  }

  /** In turn: the session's writer opened (or its log created), then the batch checked, encoded and committed. */
  #appendOpening(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    const id = target.header.id
    this.#opening.set(id, (this.#opening.get(id) ?? 0) + 1)
    return this.#writers.serial(id, async () => {
      try {
        const opened = await this.#writers.openOrCreate(id, (place) =>
          createLog(this.#ctx, this.#writers, this.#forks, place, target, events),
        )
        if (opened.kind === 'created') return opened.value
        if (opened.kind === 'missing') throw notFound(id)
        return await this.#commit(opened.writer, this.#accept(opened.writer, target, events))
      } finally {
        const left = this.#opening.get(id)! - 1
        if (left === 0) this.#opening.delete(id)
        else this.#opening.set(id, left)
      }
    })
  }

  /** Checks `events` against the log as it is when their turn comes, and encodes them: the batch is accepted. */
  #accept(writer: Writer, target: AppendTarget, events: readonly AppendedEvent[]): Batch {
    checkAppend(target, events, {
      header: writer.physical.header,
      inheritedEventCount: writer.physical.inheritedEventCount,
      nextSeq: writer.acceptedSeq,
    })
    const batch = this.#encode(writer, events, writer.acceptedSeq)
    // Observed in turn; never an unhandled rejection meanwhile.
    if (batch.unit instanceof Promise) batch.unit.catch(() => {})
    writer.acceptedSeq += batch.count
    return batch
  }

  /** The batch of `items` from `firstSeq` (runs packed where the codec packs them, else given as their events). */
  #encode(writer: Writer, items: readonly AppendedEvent[], firstSeq: number): Batch {
    if (items.length === 0) return { firstSeq, count: 0, unit: undefined }
    const { codec } = this.#ctx
    const events = codec.packsRuns ? items : expandEventRuns(writer.id, items)
    const count = appendedEventCount(events)
    return { firstSeq, count, unit: encodeBatchUnit(codec, events, firstSeq, count) }
  }

  /** In turn: an accepted batch written and synced, or refused when the log is not what it was accepted against. */
  async #commit(writer: Writer, batch: Batch): Promise<AppendResult> {
    if (this.#writers.get(writer.id) !== writer) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session ${writer.label} was deleted while a batch waited for its turn; nothing was appended.`,
        { details: { id: writer.id } },
      )
    }
    if (batch.firstSeq !== writer.nextSeq) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session ${writer.label} expects seq ${writer.nextSeq} next, but the batch starts at seq ${batch.firstSeq} (a batch before it was not committed); nothing was appended.`,
        { details: { id: writer.id, expectedSeq: writer.nextSeq, seq: batch.firstSeq } },
      )
    }
    if (batch.unit !== undefined) await this.#write(writer, batch.count, batch.unit)
    return { revision: writer.revision, nextSeq: writer.nextSeq as SessionLogOffset }
  }

  /**
   * Durable append of one unit at the log's end — into its padding when it
   * has some (`PaddedTail.planAppend`: no size change, so the sync flushes
   * data only) — between the change's journal records. On failure the file
   * is truncated back to its committed end and the error rethrown.
   */
  async #write(writer: Writer, count: number, unit: NonNullable<Batch['unit']>): Promise<void> {
    const { codec, metrics, feed } = this.#ctx
    this.#batchesInFlight++
    try {
      if (writer.lock.verifyDue()) await writer.lock.verify(writer.label)
      const [body, trailer] = Array.isArray(unit) ? unit : await unit
      const fd = writer.handle.fd
      const padded = codec.padsTail ? writer.tail.planAppend(body, trailer, writer.nextSeq + count) : undefined
      let stats: Stats | undefined
      const op = feed.begin(writer.id)
      try {
        if (padded === undefined) await writevAt(fd, [body, trailer], writer.tail.committedEnd)
        else for (const [at, bytes] of padded.writes) await writevAt(fd, bytes, at)
        // A lone small batch syncs inline (no thread-pool round trip); batches of several sessions at once overlap on the
        // pool, and so does a batch compressed there (large: its caller, an import, reads on meanwhile). A padding growth
        // counts its zeros: what the sync flushes.
        const inline =
          Array.isArray(unit) && this.#batchesInFlight === 1 && (padded?.bytes ?? body.length + trailer.length) <= SYNC_WRITE_MAX
        await fdatasyncFd(fd, inline)
        if (inline) metrics.inlineSyncs++
        // A padded log's revision is its tail's (no stat). Otherwise a synchronous fstat of an open, just-synced file is
        // a cheap system call (the inode is in memory); an asynchronous one, a round trip.
        if (padded === undefined) stats = fstatSync(fd)
      } catch (error) {
        await this.#failed(writer, error as Error)
      } finally {
        feed.end(writer.id, op)
      }
      this.#committed(writer, body, trailer, count, padded, stats)
    } catch (error) {
      // Batches accepted after this one assumed it committed: they are refused in their turn, and the next accepted
      // batch continues the log as it is.
      writer.acceptedSeq = writer.nextSeq
      throw error
    } finally {
      this.#batchesInFlight--
    }
  }

  /** A batch is written and synced: where the log ends, its next seq and its revision after it. */
  #committed(
    writer: Writer,
    body: Buffer,
    trailer: Buffer,
    count: number,
    padded: PaddedWrite | undefined,
    stats: Stats | undefined,
  ): void {
    writer.tail = writer.tail.appended(body, trailer, padded)
    writer.nextSeq += count
    writer.revision = stats === undefined ? writer.tail.revision(writer.headerCrc) : revisionOf(writer.headerCrc, stats)
    this.#ctx.metrics.appends++
  }

  /** A batch's write or sync failed: the log is truncated back to its committed end (or the writer dropped); then the typed error. */
  async #failed(writer: Writer, error: Error): Promise<never> {
    try {
      await writer.handle.truncate(writer.tail.committedEnd)
      await writer.handle.sync()
      writer.tail = writer.tail.truncated()
    } catch {
      // The file may hold part of the batch: forget this writer so the next operation rescans (and truncates) the log.
      await this.#writers.drop(writer)
    }
    throw persistenceError(
      'SESSION_PERSISTENCE_IO',
      `Appending to session ${writer.label} failed (${error.message}); nothing of the batch was committed.`,
      { cause: error, details: { id: writer.id } },
    )
  }

  /**
   * Commits crash repair and returns the log, in the session's turn: a torn
   * tail is truncated and every turn left open gets a durable
   * `turn/end {reason:'interrupted'}`. The whole log (a fork's inherited
   * prefix included) is verified. The session's writer stays open (its lock
   * held) for the resumed session's appends.
   */
  async load(id: SessionId, signal: AbortSignal | undefined): Promise<LoadedSession> {
    const { reader } = this.#ctx
    const opened = await this.#writers.open(id, 'existing')
    if (opened.kind !== 'writer') throw notFound(id)
    const writer = opened.writer
    let repaired = opened.truncated
    let events: StoredSessionEvent[]
    try {
      throwIfAborted(signal, cancelled)
      const own = await reader.readOwnFrom(writer.handle, writer.file, writer.tail.committedEnd, signal)
      events = await reader.joinedEvents(own, writer.file, signal)
    } catch (error) {
      // Do not keep a damaged (or unwanted) session locked.
      await this.#writers.drop(writer)
      throw error
    }
    const repairs = this.#repairs.eventsFor(events, this.#clock())
    if (repairs.length > 0) {
      const batch = this.#encode(writer, repairs, writer.nextSeq)
      await this.#write(writer, batch.count, batch.unit!)
      // Batches accepted while the load waited assumed the log without its repairs: refused in their turn.
      writer.acceptedSeq = writer.nextSeq
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
  }
}
