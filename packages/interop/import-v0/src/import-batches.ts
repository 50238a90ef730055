import type { AppendedEvent, AppendTarget, SessionPersistence } from '@dsh/session-persistence'
import { appendedEventCount } from '@dsh/session-persistence'
import { ImportV0Error, type ImportV0ErrorCode, throwIfAborted } from './errors.js'

/**
 * The writing side of one import run: its settings, the failure a session
 * reports, and the batcher that appends a session's events with at most two
 * appends in flight.
 */

export function isCancel(error: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || (error instanceof Error && 'code' in error && error.code === 'CANCELLED')
}

/** What a session's committed appends left stored: their batches and the events those held. */
export interface Kept {
  readonly appends: number
  readonly appended: number
}

export const NOTHING_KEPT: Kept = { appends: 0, appended: 0 }

/** A per-session failure that knows how many events the v0 log held, and what this run's appends of the session left stored. */
export class SessionFailure extends ImportV0Error {
  constructor(
    readonly events: number,
    code: ImportV0ErrorCode,
    message: string,
    cause?: unknown,
    readonly kept: Kept = NOTHING_KEPT,
  ) {
    super(code, message, cause === undefined ? undefined : { cause })
  }
}

/** The part of the persistence contract an import uses (`delete` only to take back a session this run created and could not finish reading). */
export type ImportTarget = Pick<SessionPersistence, 'stat' | 'inspect' | 'append' | 'delete'>

export interface RunContext {
  readonly from: string
  readonly persistence: ImportTarget
  readonly dryRun: boolean
  readonly batchEvents: number
  readonly batchBytes: number
  readonly signal: AbortSignal | undefined
}

/**
 * Append batches: up to `batchEvents` events and about `batchBytes` of source
 * text each (a run of events is never split: a batch closes before the item
 * that finds it full); the first batch holds at least `firstAtLeast` events
 * (a new fork's whole inherited prefix). Fewer, larger batches mean fewer fsyncs;
 * the byte bound keeps one batch's serialised text small.
 */
export class Batcher {
  /** Appends started, appends committed (their promise fulfilled), and the events those held. */
  started = 0
  appends = 0
  appendedEvents = 0
  /** The last append started (it settles once it and every earlier one settled), and the one before it. */
  private inFlight: Promise<void> | undefined
  private older: Promise<void> | undefined
  private batch: AppendedEvent[] = []
  /** Events (a run counts its own) and source text in `batch`; events added so far. */
  private events = 0
  private bytes = 0
  private added = 0
  private readonly held: AppendedEvent[][] = []

  constructor(
    private readonly run: RunContext,
    private readonly target: AppendTarget,
    private readonly firstAtLeast: number,
  ) {}

  /**
   * Adds one event, or a run of `size` events. When the batch was full it is
   * appended first (`eager`; the promise to await is returned) or held until
   * `finish` — synchronous otherwise, so most events cost no promise.
   */
  add(event: AppendedEvent, size: number, textLength: number, eager: boolean): Promise<void> | undefined {
    let appending: Promise<void> | undefined
    if (
      this.batch.length > 0 &&
      this.added >= this.firstAtLeast &&
      (this.events >= this.run.batchEvents || this.bytes >= this.run.batchBytes)
    ) {
      const full = this.batch
      this.batch = []
      this.events = 0
      this.bytes = 0
      if (eager) appending = this.append(full)
      else this.held.push(full)
    }
    this.batch.push(event)
    this.events += size
    this.bytes += textLength
    this.added += size
    return appending
  }

  /** Appends what is held and the last batch (a new session with no events at all: its header alone), and waits for every append. */
  async finish(): Promise<void> {
    if (this.batch.length > 0 || (this.started === 0 && this.held.length === 0)) this.held.push(this.batch)
    this.batch = []
    this.events = 0
    for (const batch of this.held.splice(0)) await this.append(batch)
    await this.settle()
  }

  /** Waits until every append started has been committed or refused (the first failure is thrown here). */
  async settle(): Promise<void> {
    const pending = this.inFlight
    this.inFlight = undefined
    this.older = undefined
    await pending
  }

  /**
   * Starts one append with at most one other in flight: while the previous
   * batch is written and synced, this one is serialised and compressed (a
   * JSONL backend encodes a batch when it is queued behind another), and the
   * next is read and converted (appends of one session stay in order: the
   * backend queues them). A failure is reported for the first batch that
   * failed, once the later one in flight settled too (a backend refuses what
   * was queued behind a failed batch of the session).
   */
  private async append(events: AppendedEvent[]): Promise<void> {
    if (this.run.dryRun) return
    const older = this.older
    this.older = undefined
    await older
    throwIfAborted(this.run.signal)
    this.started += 1
    const previous = this.inFlight
    const size = appendedEventCount(events)
    // Counted when committed (not `events`: the closure would keep them alive until then).
    const appended = this.run.persistence.append(this.target, events).then(() => {
      this.appends += 1
      this.appendedEvents += size
    })
    appended.catch(() => {})
    const pending = (async () => {
      const [before, own] = await Promise.allSettled([previous, appended])
      if (before.status === 'rejected') throw before.reason
      if (own.status === 'fulfilled') return
      const error: unknown = own.reason
      if (isCancel(error, this.run.signal)) throw error
      const code = error instanceof Error && 'code' in error ? String(error.code) : 'UNKNOWN'
      throw new SessionFailure(
        0, // the events read so far: set by importOne, which counts them
        'IMPORT_V0_PERSISTENCE_FAILED',
        `Writing the imported session failed (${code}: ${(error as Error).message}); the next run continues from what was written.`,
        error,
      )
    })()
    // Observed by the next settle(); never an unhandled rejection meanwhile.
    pending.catch(() => {})
    this.older = previous
    this.inFlight = pending
  }
}
