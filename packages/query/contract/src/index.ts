export { decodeCursor, encodeCursor, encodeListCursor, requestDigest } from './cursor.js'
export type { SessionQueryErrorCode } from './errors.js'
export { SessionQueryError } from './errors.js'
export type { EventTextClean } from './event-text.js'
export { eventText, MAX_EVENT_TEXT } from './event-text.js'
export { cancelled, checkAborted, fromPersistenceError, guarded, invalidCursor, invalidFilter } from './failures.js'
export type { ParsedListFilter } from './filter.js'
export { MAX_PAGE_SIZE, matchesFilter, parseListFilter } from './filter.js'
export type { ObserveSession } from './history.js'
export { eventWindow, historyPage, parseHistoryRequest, parseWindowRequest, readHistoryOf, readWindowOf } from './history.js'
export { indexFetchLimit, indexListPage, listPersisted, withLiveRevisions } from './index-listing.js'
export type { SessionQueryOptions } from './memory-query.js'
export { createSessionQuery } from './memory-query.js'
export type { RecordKey } from './order.js'
export { compareKeys, keyOf } from './order.js'
export { sessionQueryPlugin } from './plugin.js'
export { liveRecord, mergeCorpus, pageOf, persistedRecord } from './records.js'
export type { ParsedSearchRequest, SearchKind } from './search-request.js'
export { checkSearchGeneration, encodeSearchCursor, parseSearchRequest, SEARCH_MAX_OFFSET } from './search-request.js'
export { parseSearchTerms, SEARCH_MAX_TERMS, SEARCH_MAX_TEXT, SEARCH_PAGE_DEFAULT_LIMIT, SEARCH_PAGE_MAX_LIMIT } from './search-terms.js'
export type { LiveSessions, QuerySources } from './sources.js'
// Building blocks shared with index backends (`@dsh/session-query-sqlite`), so
// that every backend validates, orders, pages and encodes cursors alike.
export { liveObservation, observe, parseId } from './sources.js'
export type {
  EventSearchHit,
  EventWindow,
  EventWindowRequest,
  HistoryPage,
  HistoryPageRequest,
  IndexProgress,
  SearchPage,
  SearchRequest,
  SessionListFilter,
  SessionListPage,
  SessionQuery,
  SessionQueryObservation,
  SessionQueryRecord,
  SessionSearchHit,
} from './types.js'
