import { SEARCH_MAX_TERMS, SEARCH_MAX_TEXT, searchTerms } from '@dsh/protocol/limits'
import { invalidFilter } from './failures.js'

// The limits are declared once, in `@dsh/protocol/limits` (a module without
// zod): the HTTP host, the client and every query backend refuse the same
// requests.

/**
 * The distinct terms of an untrusted search text (maximal runs of letters
 * and digits, lower-cased, first-seen order: the protocol's `searchTerms`).
 * A repeated word counts once, so `the` 249 times is one term. Text longer
 * than `SEARCH_MAX_TEXT`, no term, or more than `SEARCH_MAX_TERMS` distinct
 * terms is `SESSION_QUERY_INVALID_FILTER`: the cost of a full-text query
 * grows with its terms, and these bounds are what keep it linear and small.
 */
export function parseSearchTerms(text: unknown): string[] {
  if (typeof text !== 'string' || text.length > SEARCH_MAX_TEXT)
    throw invalidFilter(`text must be a string of at most ${SEARCH_MAX_TEXT} characters`)
  const terms = searchTerms(text)
  if (terms.length === 0) throw invalidFilter('text must contain at least one word (letters or digits)')
  if (terms.length > SEARCH_MAX_TERMS)
    throw invalidFilter(`text has ${terms.length} distinct words; a search takes at most ${SEARCH_MAX_TERMS}`)
  return terms
}
