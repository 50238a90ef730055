import {
  checkSearchGeneration,
  encodeSearchCursor as encodeCursorOf,
  type ParsedSearchRequest,
  parseSearchRequest as parseRequest,
  type SearchKind,
} from '@dsh/session-query'

/** The SQLite index's search cursors (another backend's cursors are refused). */
const CURSOR_TAG = 'search'

export interface ParsedSearch extends ParsedSearchRequest {
  /** The FTS5 query: every distinct word of the request, quoted, all required. */
  readonly match: string
}

/**
 * Validates a search request by the rules every backend shares
 * (`@dsh/session-query`: the protocol's limits, typed errors, cursors bound to
 * the request). Each distinct word becomes a quoted FTS5 phrase, so no input
 * can inject FTS syntax, and a word repeated 249 times is one term: the
 * statement's cost is linear in at most `SEARCH_MAX_TERMS` terms.
 */
export function parseSearchRequest(input: unknown, kind: SearchKind): ParsedSearch {
  const search = parseRequest(input, kind, CURSOR_TAG)
  return { ...search, match: search.words.map((w) => `"${w}"`).join(' ') }
}

export const checkGeneration = checkSearchGeneration

export function encodeSearchCursor(kind: SearchKind, search: ParsedSearch, generation: string, offset: number): string | undefined {
  return encodeCursorOf(kind, CURSOR_TAG, search, generation, offset)
}
