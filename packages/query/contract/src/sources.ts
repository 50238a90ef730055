import type { Session, SessionId } from '@dsh/session'
import type { SessionObservation, SessionPersistence } from '@dsh/session-persistence'
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
