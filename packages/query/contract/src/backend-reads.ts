// `@dsh/session-query/backend/reads`: the rules of a backend's reads beyond
// listing — observing one session, history pages and windows, and search
// requests with their cursors. A separate door from `./backend` so that a
// listing loads none of it; an index backend imports it when a read or a
// search first needs it.
export { parseHistoryRequest, parseWindowRequest, readHistoryOf, readWindowOf } from './history.js'
export type { ParsedSearchRequest, SearchKind } from './search-request.js'
export { checkSearchGeneration, encodeSearchCursor, parseSearchRequest, SEARCH_MAX_OFFSET } from './search-request.js'
export { parseSearchTerms } from './search-terms.js'
export type { SnippetMarkers } from './snippet.js'
export { markedSnippet, snippetMarkers } from './snippet.js'
export type { SessionRangeRead } from './sources.js'
export { liveObservation, observe, observeRange, parseId } from './sources.js'
