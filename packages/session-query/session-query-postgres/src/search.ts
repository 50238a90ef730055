import {
  checkSearchGeneration,
  encodeSearchCursor as encodeCursorOf,
  type ParsedSearchRequest,
  parseSearchRequest as parseRequest,
  type SearchKind,
} from '@dsh/session-query'

/** PostgreSQL's search cursors (another backend's cursors are refused). */
const CURSOR_TAG = 'pg-search'

/** The words reach `plainto_tsquery` as a parameter, so nothing in them is syntax. */
export type ParsedSearch = ParsedSearchRequest

/** Validates a search request by the rules every backend shares (`@dsh/session-query`). */
export function parseSearchRequest(input: unknown, kind: SearchKind): ParsedSearch {
  return parseRequest(input, kind, CURSOR_TAG)
}

export const checkGeneration = checkSearchGeneration

export function encodeSearchCursor(kind: SearchKind, search: ParsedSearch, generation: string, offset: number): string | undefined {
  return encodeCursorOf(kind, CURSOR_TAG, search, generation, offset)
}
