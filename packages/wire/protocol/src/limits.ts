// The one set of request limits. The HTTP host refuses past them, the client
// refuses to send past them, and query backends may import them so that every
// layer answers the same request the same way.

/** Longest search text, in UTF-16 code units, before any normalisation. */
export const SEARCH_MAX_TEXT = 1000

/**
 * Most distinct search terms in one request. Repeated words count once; the
 * cost of a full-text query grows with its terms, so the cap bounds it.
 */
export const SEARCH_MAX_TERMS = 16

/** Largest page of search hits a caller may ask for. */
export const SEARCH_PAGE_MAX_LIMIT = 100

/** Page of search hits when the caller names no `limit`. */
export const SEARCH_PAGE_DEFAULT_LIMIT = 20

/** Largest page of sessions or history events a caller may ask for. */
export const PAGE_MAX_LIMIT = 1000

/** Page of sessions or history events when the caller names no `limit`. */
export const PAGE_DEFAULT_LIMIT = 100

/** Longest session id a route accepts, in UTF-16 code units after percent-decoding. */
export const ID_MAX_LENGTH = 1024

/** Longest free-text query parameter (a cwd, a cursor), after percent-decoding. */
export const PARAM_MAX_LENGTH = 4096

/**
 * The distinct terms of a search text, in first-seen order: maximal runs of
 * letters and digits, lower-cased. Everything else separates terms, so no
 * input can carry query syntax. This is the one tokenisation every layer
 * applies; `SEARCH_MAX_TERMS` counts its result.
 */
export function searchTerms(text: string): string[] {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
}
