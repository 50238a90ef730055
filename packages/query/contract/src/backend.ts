// `@dsh/session-query/backend`: the listing path of an index backend, and
// nothing else. An index backend (`@dsh/session-query-sqlite`) imports these
// on the path every `dsh sessions` takes, so that a listing loads the rules
// it applies — filter and cursor parsing, paging, live records, failures,
// event text — and not the history, search and in-memory modules; it imports
// the rest from `@dsh/session-query` when a search, a history read or a scan
// first needs it. The same functions as the main entry (same module files):
// one place for each rule, two doors.
export { SessionQueryError } from './errors.js'
export { eventText, MAX_EVENT_TEXT } from './event-text.js'
export { checkAborted, fromPersistenceError, guarded } from './failures.js'
export { parseListFilter } from './filter.js'
export { indexFetchLimit, indexListPage, listPersisted, withLiveRevisions } from './index-listing.js'
