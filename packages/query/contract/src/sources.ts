import type { Session, SessionHeader, SessionId, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import type { SessionObservation, SessionPersistence, SessionRange, SessionRangeObservation } from '@dsh/session-persistence'
import { checkRange, rangeBounds } from '@dsh/session-persistence/backend'
import { checkAborted, fromPersistenceError, guarded, invalidFilter, notFound } from './failures.js'
import { show } from './filter.js'
import type { SessionQueryObservation } from './types.js'

/** The live sessions a query consults: the `sessions` store, or anything shaped like it. */
export interface LiveSessions {
  get(id: string): Session | undefined
  list(): readonly Session[]
}

/** What every query backend reads from. */
export interface QuerySources {
  readonly sessions: LiveSessions
  /** Absent in a live-only deployment: then only live sessions exist for the query. */
  readonly persistence?: SessionPersistence | undefined
}

/** Validates a session id argument. */
export function parseId(id: unknown): SessionId {
  if (typeof id !== 'string' || id.length === 0) throw invalidFilter(`a session id must be a non-empty string, got ${show(id)}`)
  return id as SessionId
}

/** A body-bearing observation of a live session: its frozen event snapshot, no log read. */
export function liveObservation(session: Session): SessionQueryObservation {
  return Object.freeze({ header: session.header, inheritedEventCount: session.inheritedEventCount, events: session.events, live: true })
}

function persistedObservation(observation: SessionObservation): SessionQueryObservation {
  return Object.freeze({
    header: observation.header,
    inheritedEventCount: observation.inheritedEventCount,
    events: observation.events,
    live: false,
    revision: observation.revision,
  })
}

/**
 * Observes one session: live sessions answer from memory; persisted ones
 * through `persistence.inspect` (which shares concurrent reads and reuses its
 * prepared-observation LRU). Cancellation is checked before and after the read.
 */
export async function observe(sources: QuerySources, id: unknown, signal: AbortSignal | undefined): Promise<SessionQueryObservation> {
  checkAborted(signal)
  const sid = parseId(id)
  const live = sources.sessions.get(sid)
  if (live !== undefined) return liveObservation(live)
  if (sources.persistence === undefined) throw notFound(sid)
  let observation: SessionObservation
  try {
    observation = await guarded(sources.persistence.inspect(sid, signal), signal)
  } catch (error) {
    throw fromPersistenceError(error, sid, signal)
  }
  checkAborted(signal)
  return persistedObservation(observation)
}

/** A range of one session's events (see `observeRange`). */
export interface SessionRangeRead {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** The offset of `events[0]`, clipped to the log. */
  readonly from: number
  readonly events: readonly StoredSessionEvent[]
  /** Every event of the session, inherited included. */
  readonly total: number
  readonly live: boolean
}

/**
 * A range of one session's events: a live session's from memory; a
 * persisted one's through `persistence.inspectRange`, which reads the
 * batches holding the range and not the rest of the log. Cancellation is
 * checked before and after the read.
 */
export async function observeRange(
  sources: QuerySources,
  id: unknown,
  range: SessionRange,
  signal: AbortSignal | undefined,
): Promise<SessionRangeRead> {
  checkAborted(signal)
  const sid = parseId(id)
  const live = sources.sessions.get(sid)
  if (live !== undefined) {
    const events = live.events
    const { start, end } = rangeBounds(checkRange(range), events.length)
    const { header, inheritedEventCount } = live
    return Object.freeze({ header, inheritedEventCount, from: start, events: events.slice(start, end), total: events.length, live: true })
  }
  if (sources.persistence === undefined) throw notFound(sid)
  let read: SessionRangeObservation
  try {
    read = await guarded(sources.persistence.inspectRange(sid, range, signal), signal)
  } catch (error) {
    throw fromPersistenceError(error, sid, signal)
  }
  checkAborted(signal)
  const { header, inheritedEventCount, from, events, total } = read
  return Object.freeze({ header, inheritedEventCount, from, events, total, live: false })
}
