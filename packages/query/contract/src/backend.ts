// `@dsh/session-query/backend`: what a backend's listing is built from, so
// that every backend validates, orders, pages and fails alike — filter
// parsing, the keyset order and its cursors, the live-preferred merge and
// page assembly, the failure vocabulary, and the searchable text of an event
// (which an index writes while it lists). An index backend imports these on
// the path every `dsh sessions` takes; nothing here loads history, search or
// the in-memory backend. The rest of a backend's rules is `./backend/reads`.

export { decodeCursor, encodeCursor, encodeListCursor, requestDigest } from './cursor.js'
export type { EventTextClean } from './event-text.js'
export { eventText, MAX_EVENT_TEXT } from './event-text.js'
export { cancelled, checkAborted, fromPersistenceError, guarded, invalidCursor, invalidFilter, queryError } from './failures.js'
export type { ParsedListFilter } from './filter.js'
export { MAX_PAGE_SIZE, matchesFilter, parseListFilter } from './filter.js'
export { indexFetchLimit, indexListPage, listPersisted, withLiveRevisions } from './index-listing.js'
export type { RecordKey } from './order.js'
export { compareKeys, recordKeyOf } from './order.js'
export { liveRecord, mergeCorpus, pageOf, persistedRecord } from './records.js'
export type { QuerySources } from './sources.js'
