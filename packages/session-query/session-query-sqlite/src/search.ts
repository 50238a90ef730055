/** The SQLite index's search cursors: another backend's cursors are refused (`parseSearchRequest` of `@dsh/session-query`). */
export const SEARCH_CURSOR_TAG = 'search'

/**
 * The FTS5 query of a request's distinct words: each a quoted phrase, all
 * required, so no input can inject FTS syntax, and a word repeated 249 times
 * is one term: the statement's cost is linear in at most `SEARCH_MAX_TERMS`
 * terms.
 */
export function ftsMatch(words: readonly string[]): string {
  return words.map((w) => `"${w}"`).join(' ')
}
