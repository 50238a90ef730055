import type { Session, SessionId } from '@dsh/session'
import type { PersistedSessionRecord, SessionPersistence } from '@dsh/session-persistence'
import { checkAborted, fromPersistenceError, guarded } from './failures.js'
import { matchesFilter, type ParsedListFilter } from './filter.js'
import { liveRecord, pageOf } from './records.js'
import type { LiveSessions, QuerySources } from './sources.js'
import type { SessionListPage, SessionQueryRecord } from './types.js'

/**
 * How many persisted rows an index fetches for one listing page: the page,
 * plus one per live session (a persisted row shadowed by a live session is
 * dropped), plus one to know whether a next page exists. No limit, no cap.
 */
export function indexFetchLimit(filter: ParsedListFilter, liveCount: number): number | undefined {
  return filter.limit === undefined ? undefined : filter.limit + liveCount + 1
}

/**
 * One listing page of an index backend, from the persisted records its index
 * returned for `filter` (at most `indexFetchLimit` of them) and the live
 * sessions taken before the fetch: a live session replaces its persisted
 * row, live sessions that match join, then `pageOf` orders and cuts. Live
 * records on the page report whether (and at which revision) their log is
 * persisted: one `stat` each (`SESSION_QUERY_PERSISTENCE_FAILED` and
 * cancellation as for any persistence read).
 */
export async function indexListPage(
  sources: { readonly sessions: LiveSessions; readonly persistence: SessionPersistence },
  filter: ParsedListFilter,
  persisted: readonly SessionQueryRecord[],
  live: readonly Session[],
  signal: AbortSignal | undefined,
): Promise<SessionListPage> {
  const liveIds = new Set<string>(live.map((s) => s.id))
  const candidates = persisted.filter((r) => !liveIds.has(r.header.id))
  for (const session of live) if (matchesFilter(session.header, filter)) candidates.push(liveRecord(session, undefined))
  const page = pageOf(candidates, filter)
  return Object.freeze({ ...page, records: await withLiveRevisions(sources, page.records, signal) })
}

/** Live records report whether (and at which revision) their log is persisted: one `stat` each; other records pass unchanged. */
export async function withLiveRevisions(
  sources: { readonly sessions: LiveSessions; readonly persistence: SessionPersistence },
  records: readonly SessionQueryRecord[],
  signal: AbortSignal | undefined,
): Promise<readonly SessionQueryRecord[]> {
  if (!records.some((r) => r.live)) return records
  const out = await Promise.all(
    records.map(async (record) => {
      if (!record.live) return record
      const session = sources.sessions.get(record.header.id)
      let revision: string | undefined
      try {
        revision = await guarded(sources.persistence.stat(record.header.id as SessionId, signal), signal)
      } catch (error) {
        throw fromPersistenceError(error, record.header.id, signal)
      }
      return session === undefined ? record : liveRecord(session, revision === undefined ? undefined : { revision })
    }),
  )
  checkAborted(signal)
  return Object.freeze(out)
}

/** Header-only records of every persisted session (none without persistence). */
export async function listPersisted(sources: QuerySources, signal: AbortSignal | undefined): Promise<PersistedSessionRecord[]> {
  if (sources.persistence === undefined) return []
  let records: PersistedSessionRecord[]
  try {
    records = await guarded(sources.persistence.list(signal), signal)
  } catch (error) {
    throw fromPersistenceError(error, undefined, signal)
  }
  checkAborted(signal)
  return records
}
