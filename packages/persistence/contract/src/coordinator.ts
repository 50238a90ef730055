import { type Context, consoleLogger, isDshError, type Logger } from '@dsh/context'
import { type Session, type SessionCreatedInfo, type SessionId, type StoredSessionEvent, sameLifecycle } from '@dsh/session'
import { SessionPersistenceError } from './errors.js'
import type { AppendTarget, SessionObservation, SessionPersistence } from './types.js'

export interface PersistenceCoordinatorOptions {
  /** How long new events wait so that later ones join their batch (ms). Default 5. */
  readonly writeBehindMs?: number
  /** The largest batch one append carries (a first batch still carries the whole seed). Default 10,000. */
  readonly maxBatchEvents?: number
  /** Delay before the first retry of a failed batch (ms); doubles per failure. Default 20. */
  readonly retryDelayMs?: number
  /** Upper bound of the retry delay (ms). Default 2,000. */
  readonly maxRetryDelayMs?: number
  /**
   * How long `close` keeps retrying, with the same backoff, events the store
   * failed to take for a reason a retry can fix (the server restarting), before
   * it gives up on them (ms). Default 5,000; 0 makes one last attempt only.
   */
  readonly closeWaitMs?: number
  /** Where failures are reported. Default: the context's `logger` service, then the console. */
  readonly logger?: Logger
}

/** What the coordinator knows about one live session's durability. */
export interface CoordinatorSessionStatus {
  /** Events `[0, durableSeq)` are durable; `undefined` until an adopted session was checked. */
  readonly durableSeq: number | undefined
  /** Whether the session's header is durable. */
  readonly materialized: boolean
  /** Events appended in memory and not yet durable. */
  readonly pending: number
  /** Failed attempts since the last success. */
  readonly failures: number
  readonly lastError?: unknown
  /** True after a failure that retrying cannot fix; only an explicit flush tries again. */
  readonly stalled: boolean
}

/** A session whose header or events are not durable. */
export interface UnstoredSession {
  readonly id: string
  /** Events appended in memory and not durable. */
  readonly pending: number
  /** Why the last attempt failed, if one did. */
  readonly lastError?: unknown
}

/** Failures a retry cannot fix: the coordinator stops retrying them on its own. */
const PERMANENT = new Set([
  'SESSION_PERSISTENCE_CONFLICT',
  'SESSION_PERSISTENCE_INVALID_ID',
  'SESSION_PERSISTENCE_INVALID_EVENT',
  'SESSION_PERSISTENCE_EVENT_TOO_LARGE',
  'SESSION_PERSISTENCE_UNSUPPORTED_VERSION',
  'SESSION_PERSISTENCE_CORRUPT',
  'SESSION_PERSISTENCE_CLOSED',
])

interface FlushWaiter {
  readonly target: number
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

interface Tracker {
  readonly session: Session
  durable: number | undefined
  materialized: boolean
  inflight: Promise<void> | undefined
  timer: NodeJS.Timeout | undefined
  retryTimer: NodeJS.Timeout | undefined
  failures: number
  lastError: unknown
  stalled: boolean
  disposed: boolean
  waiters: FlushWaiter[]
}

/**
 * Persists every live session's new events from `SessionStore` events.
 *
 * The session log is the source of truth: the coordinator only keeps a
 * durable watermark per session and writes `[watermark, session.seq)` as one
 * batch after a short write-behind window. One write per session is in flight
 * at a time and the watermark moves only when an append resolved, so a failed
 * batch is retried from the same place: never lost, reordered or duplicated.
 */
export class SessionPersistenceCoordinator {
  readonly #ctx: Context
  readonly #persistence: SessionPersistence
  readonly #writeBehindMs: number
  readonly #maxBatch: number
  readonly #retryDelayMs: number
  readonly #maxRetryDelayMs: number
  readonly #closeWaitMs: number
  readonly #logger: Logger | undefined
  readonly #trackers = new Map<string, Tracker>()
  /** Disposed or replaced trackers that still have events to write. */
  readonly #retiring = new Set<Tracker>()
  readonly #unsubscribe: Array<() => void> = []
  #started = false
  #closed = false

  constructor(ctx: Context, persistence: SessionPersistence, options: PersistenceCoordinatorOptions = {}) {
    this.#ctx = ctx
    this.#persistence = persistence
    this.#writeBehindMs = nonNegative(options.writeBehindMs ?? 5, 'writeBehindMs')
    this.#maxBatch = Math.max(1, nonNegative(options.maxBatchEvents ?? 10_000, 'maxBatchEvents'))
    this.#retryDelayMs = nonNegative(options.retryDelayMs ?? 20, 'retryDelayMs')
    this.#maxRetryDelayMs = Math.max(this.#retryDelayMs, nonNegative(options.maxRetryDelayMs ?? 2_000, 'maxRetryDelayMs'))
    this.#closeWaitMs = nonNegative(options.closeWaitMs ?? 5_000, 'closeWaitMs')
    this.#logger = options.logger
  }

  /**
   * Subscribes to the store's events. Sessions that are already live (created
   * before the coordinator started) are adopted: their durable offset is read
   * once from persistence before anything is written.
   */
  start(): void {
    if (this.#started || this.#closed) return
    this.#started = true
    this.#unsubscribe.push(
      this.#ctx.on('session/created', (session, info) => this.#onCreated(session, info)),
      this.#ctx.on('session/event', (session) => this.#onEvent(session)),
      this.#ctx.on('session/flush', (session) => this.flush(session)),
      this.#ctx.on('session/disposed', (session) => this.#onDisposed(session)),
    )
    for (const session of this.#ctx.get('sessions')?.list() ?? []) {
      if (!this.#trackers.has(session.id)) this.#schedule(this.#track(session, undefined, false))
    }
  }

  /**
   * Resolves once every event `session` held when called is durable (and its
   * header is). Rejects with the persistence error of a failed attempt; the
   * events stay pending and are retried.
   */
  flush(session: Session | string): Promise<void> {
    const id = typeof session === 'string' ? session : session.id
    let tracker = this.#trackers.get(id)
    if (typeof session !== 'string' && tracker?.session !== session) {
      tracker = [...this.#retiring].find((t) => t.session === session)
    }
    if (tracker === undefined) {
      if (typeof session === 'string' || this.#closed) return Promise.resolve()
      // A session this coordinator never saw: adopt it now.
      tracker = this.#track(session, undefined, false)
    }
    return this.#flushTracker(tracker)
  }

  /** Flushes every tracked session, including disposed ones with events still pending. */
  async flushAll(): Promise<void> {
    const trackers = [...this.#trackers.values(), ...this.#retiring]
    const settled = await Promise.allSettled(trackers.map((t) => this.#flushTracker(t)))
    const failures = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []))
    if (failures.length === 1) throw failures[0]
    if (failures.length > 1) throw new AggregateError(failures, `Flushing ${failures.length} sessions failed; their events stay pending.`)
  }

  /** The durability state of a tracked session, or `undefined`. */
  status(id: string): CoordinatorSessionStatus | undefined {
    const t = this.#trackers.get(id)
    if (t === undefined) return undefined
    return {
      durableSeq: t.durable,
      materialized: t.materialized,
      pending: t.session.seq - (t.durable ?? 0),
      failures: t.failures,
      ...(t.lastError === undefined ? {} : { lastError: t.lastError }),
      stalled: t.stalled,
    }
  }

  /**
   * Sessions whose header or events are not durable now; after a `close` that
   * rejected, what was not stored.
   */
  unstored(): UnstoredSession[] {
    return [...this.#trackers.values(), ...this.#retiring].filter(needsWrite).map((t) => ({
      id: t.session.id,
      pending: t.session.seq - (t.durable ?? 0),
      ...(t.lastError === undefined ? {} : { lastError: t.lastError }),
    }))
  }

  /**
   * Stops listening, then flushes everything still pending. A failure a retry
   * can fix is retried with the usual backoff for up to `closeWaitMs`, so a
   * store that is restarting still takes a host's last events; then close
   * rejects with the last failure (`unstored` names what was not stored).
   * The backend stays open.
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe()
    const giveUpAt = Date.now() + this.#closeWaitMs
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.flushAll()
          return
        } catch (error) {
          const wait = Math.min(this.#maxRetryDelayMs, this.#retryDelayMs * 2 ** Math.min(attempt, 30), giveUpAt - Date.now())
          if (!retryable(error) || wait <= 0) throw error
          if (attempt === 0) {
            const pending = this.unstored().reduce((sum, t) => sum + t.pending, 0)
            this.#log().warn(
              `dsh: ${pending} event(s) are not stored yet; retrying for up to ${this.#closeWaitMs} ms before giving up on them.`,
            )
          }
          await new Promise((resolve) => setTimeout(resolve, wait))
        }
      }
    } finally {
      for (const t of [...this.#trackers.values(), ...this.#retiring]) clearTimers(t)
    }
  }

  #onCreated(session: Session, info: SessionCreatedInfo): void {
    // A restored session's events are already durable: start from its seq.
    const tracker = info.restored ? this.#track(session, session.seq, true) : this.#track(session, 0, false)
    this.#schedule(tracker)
  }

  #onEvent(session: Session): void {
    const tracker = this.#trackers.get(session.id)
    if (tracker !== undefined && tracker.session === session) this.#schedule(tracker)
    else if (!this.#closed) this.#schedule(this.#track(session, undefined, false))
  }

  #onDisposed(session: Session): void {
    const tracker = this.#trackers.get(session.id)
    if (tracker === undefined || tracker.session !== session) return
    tracker.disposed = true
    this.#trackers.delete(session.id)
    if (needsWrite(tracker)) this.#retiring.add(tracker)
    else clearTimers(tracker)
  }

  #track(session: Session, durable: number | undefined, materialized: boolean): Tracker {
    const previous = this.#trackers.get(session.id)
    if (previous !== undefined && needsWrite(previous)) this.#retiring.add(previous)
    const tracker: Tracker = {
      session,
      durable,
      materialized,
      inflight: undefined,
      timer: undefined,
      retryTimer: undefined,
      failures: 0,
      lastError: undefined,
      stalled: false,
      disposed: false,
      waiters: [],
    }
    this.#trackers.set(session.id, tracker)
    return tracker
  }

  #flushTracker(t: Tracker): Promise<void> {
    const target = t.session.seq
    if (isDurable(t, target)) return Promise.resolve()
    // An explicit flush always tries again, even after a permanent failure.
    t.stalled = false
    const done = new Promise<void>((resolve, reject) => t.waiters.push({ target, resolve, reject }))
    if (t.inflight === undefined) this.#startDrain(t)
    return done
  }

  #schedule(t: Tracker): void {
    if (this.#closed || t.stalled || t.inflight !== undefined || t.timer !== undefined || t.retryTimer !== undefined) return
    if (!needsWrite(t)) return
    t.timer = setTimeout(() => {
      t.timer = undefined
      this.#startDrain(t)
    }, this.#writeBehindMs)
  }

  /** Writes batches until the tracker is caught up; one drain per tracker at a time. */
  #startDrain(t: Tracker): void {
    if (t.inflight !== undefined) return
    clearTimers(t)
    t.inflight = this.#drain(t).then(
      () => {
        t.inflight = undefined
        // Events or flushes that arrived after the last batch settled but
        // before this callback ran must not wait for the next event.
        if (t.waiters.length > 0) this.#startDrain(t)
        else if (needsWrite(t)) this.#schedule(t)
        else if (t.disposed) this.#retiring.delete(t)
      },
      (error: unknown) => {
        t.inflight = undefined
        this.#failed(t, error)
      },
    )
  }

  async #drain(t: Tracker): Promise<void> {
    while (needsWrite(t)) {
      await this.#writeOnce(t)
      if (t.failures > 0) this.#log().warn(`dsh: persisting session '${t.session.id}' recovered after ${t.failures} failed attempt(s).`)
      t.failures = 0
      t.lastError = undefined
      settleWaiters(t)
    }
    settleWaiters(t)
  }

  async #writeOnce(t: Tracker): Promise<void> {
    if (t.durable === undefined) await this.#adopt(t)
    const start = t.durable!
    let end = Math.min(t.session.seq, start + this.#maxBatch)
    // The first batch carries the whole inherited prefix (the backend requires it).
    if (!t.materialized) end = Math.max(end, Math.min(t.session.seq, t.session.inheritedEventCount))
    const batch: StoredSessionEvent[] = []
    for (let seq = start; seq < end; seq++) batch.push(t.session.eventAt(seq)!)
    try {
      const forkSource = t.materialized ? undefined : await this.#durableForkSource(t)
      if (forkSource === undefined) await this.#persistence.append(targetOf(t.session), batch)
      else {
        try {
          await this.#persistence.append({ ...targetOf(t.session), forkSource }, batch)
        } catch (error) {
          // The source cannot be referenced (not persisted up to the cut, being
          // deleted, re-created): store the fork as a copy instead.
          if (!isDshError(error, 'SESSION_PERSISTENCE_CONFLICT') || (await this.#persistence.stat(t.session.id)) !== undefined) throw error
          await this.#persistence.append(targetOf(t.session), batch)
        }
      }
    } catch (error) {
      // An append may have landed although it reported failure (a lost
      // acknowledgement); the expected-offset check then says CONFLICT.
      if (isDshError(error, 'SESSION_PERSISTENCE_CONFLICT') && (await this.#reconcile(t))) return
      throw error
    }
    t.durable = end
    t.materialized = true
  }

  /**
   * A fork's first append may reference its source's prefix instead of
   * copying it: the source's events up to the cut must be durable first, so
   * a live source tracked here is flushed (at least) up to the cut. A source
   * that is not live here is passed as is (the backend checks it holds the
   * cut, and a refusal makes the fork a copy).
   */
  async #durableForkSource(t: Tracker): Promise<SessionId | undefined> {
    const source = t.session.forkSource
    const cut = t.session.inheritedEventCount
    if (source === undefined || cut === 0) return undefined
    const tracker = this.#trackers.get(source)
    if (tracker !== undefined && !isDurable(tracker, cut)) {
      try {
        await this.#flushTracker(tracker)
      } catch {
        // The source is not durable up to the cut: store this fork as a copy.
        return undefined
      }
    }
    return source
  }

  /**
   * After a conflict: when the stored log is this session's lifecycle and its
   * extra events are exactly ours, they landed; move the watermark over them
   * instead of writing them twice. Otherwise the conflict is real.
   */
  async #reconcile(t: Tracker): Promise<boolean> {
    let stored: SessionObservation
    try {
      stored = await this.#persistence.inspect(t.session.id)
    } catch {
      return false
    }
    const durable = t.durable ?? 0
    if (!sameLifecycle(stored.header, t.session.header) || stored.inheritedEventCount !== t.session.inheritedEventCount) return false
    const count = stored.events.length
    if (count < durable || count > t.session.seq) return false
    if (count === durable && t.materialized) return false
    for (let seq = durable; seq < count; seq++) {
      if (!sameEvent(stored.events[seq]!, t.session.eventAt(seq)!)) return false
    }
    t.durable = count
    t.materialized = true
    return true
  }

  /** Learns how much of a session this coordinator did not see being created is durable. */
  async #adopt(t: Tracker): Promise<void> {
    let stored: SessionObservation
    try {
      stored = await this.#persistence.inspect(t.session.id)
    } catch (error) {
      if (!isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) throw error
      t.durable = 0
      t.materialized = false
      return
    }
    const count = stored.events.length
    const matches =
      sameLifecycle(stored.header, t.session.header) &&
      stored.inheritedEventCount === t.session.inheritedEventCount &&
      count <= t.session.seq &&
      stored.events.every((event, seq) => sameEvent(event, t.session.eventAt(seq)!))
    if (!matches) {
      throw new SessionPersistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Live session '${t.session.id}' does not continue its persisted log (another lifecycle or diverging events); it is not persisted. Delete the persisted log explicitly or use another id.`,
        { details: { id: t.session.id } },
      )
    }
    t.durable = count
    t.materialized = true
  }

  #failed(t: Tracker, error: unknown): void {
    t.failures++
    t.lastError = error
    for (const waiter of t.waiters.splice(0)) waiter.reject(error)
    if (isDshError(error) && PERMANENT.has(error.code)) {
      t.stalled = true
      this.#log().error(
        `dsh: persisting session '${t.session.id}' failed and retrying cannot fix it; its ${t.session.seq - (t.durable ?? 0)} pending event(s) stay in memory until an explicit flush succeeds.`,
        error,
      )
      return
    }
    if (t.failures === 1)
      this.#log().warn(`dsh: persisting session '${t.session.id}' failed; retrying with backoff. Its events stay in memory.`, error)
    // After close the host is shutting down: close() already made the last attempt.
    if (this.#closed) return
    const delay = Math.min(this.#maxRetryDelayMs, this.#retryDelayMs * 2 ** Math.min(t.failures - 1, 30))
    t.retryTimer = setTimeout(() => {
      t.retryTimer = undefined
      this.#startDrain(t)
    }, delay)
    // Retries alone do not keep a process alive; dispose (flush) is how a host waits.
    t.retryTimer.unref()
  }

  #log(): Logger {
    return this.#logger ?? this.#ctx.get('logger') ?? consoleLogger
  }
}

/** Whether trying again may succeed: not a failure in `PERMANENT` (for several, none of them is). */
function retryable(error: unknown): boolean {
  if (error instanceof AggregateError) return error.errors.every(retryable)
  return !(isDshError(error) && PERMANENT.has(error.code))
}

function targetOf(session: Session): AppendTarget {
  return { header: session.header, inheritedEventCount: session.inheritedEventCount }
}

function needsWrite(t: Tracker): boolean {
  return t.durable === undefined || !t.materialized || t.durable < t.session.seq
}

function isDurable(t: Tracker, target: number): boolean {
  return t.materialized && t.durable !== undefined && t.durable >= target
}

function settleWaiters(t: Tracker): void {
  if (t.waiters.length === 0) return
  const still: FlushWaiter[] = []
  for (const waiter of t.waiters) {
    if (isDurable(t, waiter.target)) waiter.resolve()
    else still.push(waiter)
  }
  t.waiters = still
}

function clearTimers(t: Tracker): void {
  if (t.timer !== undefined) clearTimeout(t.timer)
  if (t.retryTimer !== undefined) clearTimeout(t.retryTimer)
  t.timer = undefined
  t.retryTimer = undefined
}

function sameEvent(a: StoredSessionEvent, b: StoredSessionEvent): boolean {
  return a.type === b.type && a.seq === b.seq && a.time === b.time && JSON.stringify(a.data) === JSON.stringify(b.data)
}

function nonNegative(value: number, name: string): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_OPTION',
      `Coordinator option ${name} must be a non-negative number, got ${String(value)}.`,
    )
  }
  return value
}
