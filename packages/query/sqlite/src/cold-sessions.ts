import type { Session } from '@dsh/session'

/**
 * Default of `coldLimit.sessions`: as many sessions as the overlay takes
 * changes (`overlayLimit`'s default). Past that many changes behind, a
 * listing reads every header and a search is refused, so holding more would
 * only save log reads of a catch-up pass.
 */
export const COLD_SESSIONS_LIMIT = 1_000

/** Default of `coldLimit.events`: events (inherited prefixes included) held across every cold session. */
export const COLD_EVENTS_LIMIT = 100_000

export interface ColdLimit {
  /** Most sessions held (default `COLD_SESSIONS_LIMIT`). */
  readonly sessions?: number
  /** Most events held, summed over the sessions (default `COLD_EVENTS_LIMIT`). */
  readonly events?: number
}

/**
 * The sessions that went cold in this process and are not indexed yet: a
 * pass takes their text from memory instead of their logs. This is only a
 * source of text, never of which sessions to index: those are the ids the
 * change feed names since the index's cursor, plus its pending rows, and the
 * cursor advances only in a pass that wrote. So the map is bounded (a count
 * of sessions and of events); past either bound the oldest entries are
 * dropped, and a dropped session is read from its log by the pass that
 * indexes it, as a session of another process would be. A session with more
 * events than the whole bound is not held at all.
 */
export class ColdSessions {
  readonly #sessionsLimit: number
  readonly #eventsLimit: number
  /** In the order they went cold: the first is the oldest. */
  readonly #held = new Map<string, { readonly session: Session; readonly events: number }>()
  #events = 0
  #dropped = 0

  constructor(limit: ColdLimit = {}) {
    this.#sessionsLimit = bound(limit.sessions, COLD_SESSIONS_LIMIT)
    this.#eventsLimit = bound(limit.events, COLD_EVENTS_LIMIT)
  }

  /** Sessions held now. */
  get size(): number {
    return this.#held.size
  }

  /** Events held now, summed over the sessions. */
  get events(): number {
    return this.#events
  }

  /** Sessions dropped (or never held) for the bound since this process opened the index. */
  get dropped(): number {
    return this.#dropped
  }

  get(id: string): Session | undefined {
    return this.#held.get(id)?.session
  }

  /** Every session held now, oldest first. */
  list(): Session[] {
    return [...this.#held.values()].map((entry) => entry.session)
  }

  /** Holds `session` as the newest entry (replacing one of the same id), then drops the oldest past the bound. */
  hold(session: Session): void {
    // Noticed twice (its disposal event, then a look at the store): it keeps its place.
    if (this.#held.get(session.id)?.session === session) return
    this.#remove(session.id)
    // Counted as it went cold: a disposed session takes no more events.
    const events = session.seq
    if (events > this.#eventsLimit || this.#sessionsLimit === 0) {
      this.#dropped++
      return
    }
    this.#held.set(session.id, { session, events })
    this.#events += events
    for (const [id] of this.#held) {
      if (this.#held.size <= this.#sessionsLimit && this.#events <= this.#eventsLimit) break
      this.#remove(id)
      this.#dropped++
    }
  }

  /** Forgets `session` once a pass indexed it, unless another session of its id went cold since. */
  release(session: Session): void {
    if (this.#held.get(session.id)?.session === session) this.#remove(session.id)
  }

  #remove(id: string): void {
    const entry = this.#held.get(id)
    if (entry === undefined) return
    this.#held.delete(id)
    this.#events -= entry.events
  }
}

function bound(value: number | undefined, fallback: number): number {
  return value === undefined || !Number.isFinite(value) ? fallback : Math.max(0, Math.floor(value))
}
