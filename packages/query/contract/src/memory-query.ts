import { checkAborted } from './failures.js'
import { parseListFilter } from './filter.js'
import { readHistoryOf, readWindowOf } from './history.js'
import { listPersisted } from './index-listing.js'
import { mergeCorpus, pageOf } from './records.js'
import { observe, type QuerySources } from './sources.js'
import type { SessionQuery } from './types.js'

export type SessionQueryOptions = QuerySources

/**
 * The in-memory query backend (no index): every listing merges
 * `persistence.list()` (header frames only) with the live sessions of the
 * store, then filters, orders and pages in memory. Cost grows with the corpus;
 * use `@dsh/session-query-sqlite` for indexed listing and search.
 */
export function createSessionQuery(options: SessionQueryOptions): SessionQuery {
  const sources: QuerySources = { sessions: options.sessions, persistence: options.persistence }
  return {
    async listSessions(filter, signal) {
      checkAborted(signal)
      const parsed = parseListFilter(filter)
      const persisted = await listPersisted(sources, signal)
      return pageOf(mergeCorpus(persisted, sources.sessions.list()), parsed)
    },
    observeSession(id, signal) {
      return observe(sources, id, signal)
    },
    readHistory(id, request, signal) {
      return readHistoryOf(sources, id, request, signal)
    },
    readWindow(id, request, signal) {
      return readWindowOf(sources, id, request, signal)
    },
  }
}
