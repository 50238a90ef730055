import type { Context } from '@dsh/context'
import type { Session, SessionEvent } from '@dsh/session'
import type { SessionProjections } from '@dsh/session-projection'
import { type CheckpointThrottle, DEFAULT_THROTTLE } from '@dsh/session-projection-cache'
import type { PostgresProjectionCache } from './cache.js'
import { PostgresProjectionCacheError } from './errors.js'

interface Track {
  sinceWrite: number
  dirty: boolean
  timer: NodeJS.Timeout | undefined
  inflight: Promise<boolean> | undefined
  again: boolean
}

/**
 * When live sessions are checkpointed, by the SQLite cache's rules: at every
 * `turn/end` (mandatory), after N events or T ms (throttles), and when a
 * session goes cold (mandatory, the registry's final rows). One write per
 * session in flight; a write asked for meanwhile runs after it.
 */
export class CheckpointScheduler {
  readonly #cache: PostgresProjectionCache
  readonly #sessions: { list(): Session[] }
  readonly #throttle: Required<CheckpointThrottle>
  readonly #tracks = new Map<Session, Track>()
  readonly #unsubscribe: Array<() => void>
  #closed = false

  constructor(options: {
    ctx: Context
    cache: PostgresProjectionCache
    projections: SessionProjections
    sessions: { list(): Session[] }
    throttle?: CheckpointThrottle | undefined
  }) {
    this.#cache = options.cache
    this.#sessions = options.sessions
    this.#throttle = validateThrottle(options.throttle)
    this.#unsubscribe = [
      options.ctx.on('session/event', (session, event) => this.#observe(session, event)),
      options.projections.onSessionCold((session, rows) => this.#cold(session, rows)),
    ]
  }

  /** Stops scheduling, waits for in-flight writes, then writes every live session with unwritten events. */
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
  }

  #observe(session: Session, event: SessionEvent): void {
    if (this.#closed) return
    let track = this.#tracks.get(session)
    if (track === undefined) {
      track = { sinceWrite: 0, dirty: false, timer: undefined, inflight: undefined, again: false }
      this.#tracks.set(session, track)
    }
    track.sinceWrite++
    track.dirty = true
    if (event.type === 'turn/end' || track.sinceWrite >= this.#throttle.events) {
      this.#request(session, track)
    } else if (track.timer === undefined && Number.isFinite(this.#throttle.ms)) {
      const t = track
      t.timer = setTimeout(() => {
        t.timer = undefined
        this.#request(session, t)
      }, this.#throttle.ms)
      t.timer.unref()
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
    // Synchronous start: the rows are taken now, so they describe exactly the log the flush covers.
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

  async #cold(session: Session, rows: Parameters<PostgresProjectionCache['writeColdRows']>[1]): Promise<void> {
    const track = this.#tracks.get(session)
    this.#tracks.delete(session)
    if (track) {
      clearTimeout(track.timer)
      track.again = false
      // The final rows land after any older write of the same session.
      await track.inflight
    }
    await this.#cache.writeColdRows(session, rows)
  }
}

function validateThrottle(throttle: CheckpointThrottle | undefined): Required<CheckpointThrottle> {
  const merged = { ...DEFAULT_THROTTLE, ...throttle }
  for (const [name, value] of Object.entries(merged)) {
    if (typeof value !== 'number' || Number.isNaN(value) || value < 1) {
      throw new PostgresProjectionCacheError(
        'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS',
        `throttle.${name} must be a number >= 1 (or Infinity to disable it), got ${String(value)}.`,
      )
    }
  }
  return merged
}
