import type { Context } from '@dsh/context'
import type { Session, SessionEvent } from '@dsh/session'
import type { ProjectionCheckpointRows, SessionProjections } from '@dsh/session-projection'
import type { DeletedSessionFeed } from './core.js'
import { SessionProjectionCacheError } from './errors.js'

/** Background checkpoint cadence between the mandatory writes. */
export interface CheckpointThrottle {
  /** Write after this many events since the last write. Default 500; `Infinity` disables. */
  readonly events?: number
  /** Write this long (ms) after the first unwritten event. Default 2,000; `Infinity` disables. */
  readonly ms?: number
}

export const DEFAULT_THROTTLE: Required<CheckpointThrottle> = { events: 500, ms: 2_000 }

/**
 * Sessions gone cold (their final rows written) after which the scheduler
 * runs a forgetting pass, besides the passes when it starts and when it
 * closes. Every session whose rows this host adds goes cold here (at the
 * latest when the host closes), so the rows added between two passes are
 * bounded, and each pass deletes those of deleted sessions: the table stays
 * bounded while a host runs for months, at about one `stat` per session.
 */
export const FORGET_EVERY_COLD = 100

/**
 * What the scheduler needs of a cache backend: the two writes, and the
 * forgetting pass. All are fail-soft (a failure resolves or returns
 * `false`, never throws).
 */
export interface CheckpointWriter {
  /** Starts the live session's checkpoint write synchronously (its rows are taken at the call). */
  writeCheckpoint(session: Session): Promise<boolean>
  /** Writes the final rows of a session that went cold (its log was flushed already). */
  writeColdRows(session: Session, rows: ProjectionCheckpointRows): boolean | Promise<boolean>
  /** Deletes the rows of sessions persistence does not hold (`CheckpointCacheCore.forgetDeleted`); fail-soft. Optional: without it nothing is forgotten. */
  forgetDeleted?(feed: DeletedSessionFeed, live: (id: string) => boolean): Promise<boolean>
}

/** Builds the backend's typed error for a bad option (each cache package has its own error class). */
export type InvalidOptions = (message: string) => Error

const invalidOptions: InvalidOptions = (message) => new SessionProjectionCacheError('SESSION_PROJECTION_CACHE_INVALID_OPTIONS', message)

interface Track {
  /** Events since the last write started. */
  sinceWrite: number
  /** Events not yet covered by a successful write. */
  dirty: boolean
  timer: NodeJS.Timeout | undefined
  inflight: Promise<boolean> | undefined
  /** A write was asked for while one was in flight: run another when it settles. */
  again: boolean
}

/**
 * Decides when live sessions are checkpointed: at every `turn/end`
 * (mandatory), every N events and T ms after the first unwritten event
 * (throttles), and when a session goes cold (mandatory, from the registry's
 * final rows). One write per session is in flight at a time.
 *
 * Given persistence's change feed (`feed`), it also has the cache forget
 * the rows of deleted sessions: one pass when it starts, one after every
 * `FORGET_EVERY_COLD` sessions gone cold and one when it closes; one pass
 * at a time, a pass asked for meanwhile runs once after it.
 */
export class CheckpointScheduler {
  readonly #cache: CheckpointWriter
  readonly #sessions: { list(): Session[]; get(id: string): Session | undefined }
  readonly #feed: DeletedSessionFeed | undefined
  readonly #throttle: Required<CheckpointThrottle>
  readonly #tracks = new Map<Session, Track>()
  readonly #unsubscribe: Array<() => void>
  #closed = false
  /** Sessions gone cold since the last forgetting pass was asked for. */
  #coldSinceForget = 0
  #forgetting: Promise<boolean> | undefined
  #forgetAgain = false

  constructor(options: {
    ctx: Context
    cache: CheckpointWriter
    projections: SessionProjections
    sessions: { list(): Session[]; get(id: string): Session | undefined }
    /** Persistence's change feed: without it, the rows of deleted sessions are never forgotten. */
    feed?: DeletedSessionFeed | undefined
    throttle?: CheckpointThrottle | undefined
    /** The typed error for a bad throttle; defaults to `SESSION_PROJECTION_CACHE_INVALID_OPTIONS`. */
    invalid?: InvalidOptions | undefined
  }) {
    this.#cache = options.cache
    this.#sessions = options.sessions
    this.#feed = options.feed
    this.#throttle = validateThrottle(options.throttle, options.invalid ?? invalidOptions)
    this.#unsubscribe = [
      options.ctx.on('session/event', (session, event) => this.#observe(session, event)),
      options.projections.onSessionCold((session, rows) => this.#cold(session, rows)),
    ]
  }

  /** Runs the first forgetting pass; called once the cache is provided and its disposal registered. */
  start(): void {
    this.#forget()
  }

  /**
   * Stops scheduling, waits for in-flight writes, then writes every live
   * session with unwritten events, then runs the last forgetting pass.
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const off of this.#unsubscribe.splice(0)) off()
    for (const track of this.#tracks.values()) clearTimeout(track.timer)
    await Promise.allSettled([...this.#tracks.values()].map((track) => track.inflight))
    const live = new Set(this.#sessions.list())
    await Promise.allSettled(
      [...this.#tracks]
        .filter(([session, track]) => track.dirty && live.has(session) && !session.closed)
        .map(([session]) => this.#cache.writeCheckpoint(session)),
    )
    this.#tracks.clear()
    this.#forgetAgain = false
    await this.#forgetting
    await this.#pass()
  }

  /** Asks for a forgetting pass: now, or once after the one in flight. */
  #forget(): void {
    this.#coldSinceForget = 0
    if (this.#forgetting !== undefined) {
      this.#forgetAgain = true
      return
    }
    const pass = this.#pass()
    this.#forgetting = pass
    void pass.then(() => {
      this.#forgetting = undefined
      if (this.#forgetAgain && !this.#closed) {
        this.#forgetAgain = false
        this.#forget()
      }
    })
  }

  async #pass(): Promise<boolean> {
    if (this.#feed === undefined || this.#cache.forgetDeleted === undefined) return false
    try {
      return await this.#cache.forgetDeleted(this.#feed, (id) => this.#sessions.get(id) !== undefined)
    } catch {
      // Fail-soft by contract (the cache reports its own failures); a pass that broke it still ends.
      return false
    }
  }

  #track(session: Session): Track {
    let track = this.#tracks.get(session)
    if (!track) {
      track = { sinceWrite: 0, dirty: false, timer: undefined, inflight: undefined, again: false }
      this.#tracks.set(session, track)
    }
    return track
  }

  #observe(session: Session, event: SessionEvent): void {
    if (this.#closed) return
    const track = this.#track(session)
    track.sinceWrite++
    track.dirty = true
    if (event.type === 'turn/end' || track.sinceWrite >= this.#throttle.events) {
      this.#request(session, track)
    } else if (track.timer === undefined && Number.isFinite(this.#throttle.ms)) {
      track.timer = setTimeout(() => {
        track.timer = undefined
        this.#request(session, track)
      }, this.#throttle.ms)
      // A pending throttle must not keep the process alive.
      track.timer.unref()
    }
  }

  #request(session: Session, track: Track): void {
    if (this.#closed || session.closed) return
    clearTimeout(track.timer)
    track.timer = undefined
    if (track.inflight) {
      track.again = true
      return
    }
    track.sinceWrite = 0
    track.dirty = false
    // Synchronous start: the rows are taken now, inside this event's
    // notification, so they describe exactly the log the flush will cover.
    const write = this.#cache.writeCheckpoint(session)
    track.inflight = write
    void write.then((ok) => {
      track.inflight = undefined
      if (!ok) track.dirty = true
      if (track.again) {
        track.again = false
        this.#request(session, track)
      }
    })
  }

  async #cold(session: Session, rows: ProjectionCheckpointRows): Promise<void> {
    const track = this.#tracks.get(session)
    this.#tracks.delete(session)
    if (track) {
      clearTimeout(track.timer)
      track.again = false
      // The final rows must land after any older write of the same session.
      await track.inflight
    }
    await this.#cache.writeColdRows(session, rows)
    // Every FORGET_EVERY_COLD sessions gone cold, a forgetting pass.
    if (!this.#closed && ++this.#coldSinceForget >= FORGET_EVERY_COLD) this.#forget()
  }
}

function validateThrottle(throttle: CheckpointThrottle | undefined, invalid: InvalidOptions): Required<CheckpointThrottle> {
  const merged = { ...DEFAULT_THROTTLE, ...throttle }
  for (const [name, value] of Object.entries(merged)) {
    if (typeof value !== 'number' || Number.isNaN(value) || value < 1) {
      throw invalid(`throttle.${name} must be a number >= 1 (or Infinity to disable it), got ${String(value)}.`)
    }
  }
  return merged
}
