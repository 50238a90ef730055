import {
  decodeCursor,
  encodeCursor,
  invalidCursor,
  invalidFilter,
  parseSearchTerms,
  requestDigest,
  SEARCH_PAGE_DEFAULT_LIMIT,
  SEARCH_PAGE_MAX_LIMIT,
  SessionQueryError,
} from '@dsh/session-query'

const MAX_OFFSET = 100_000

export interface ParsedSearch {
  /** Distinct lower-case words (letters and digits), all required. */
  readonly words: readonly string[]
  readonly digest: string
  readonly limit: number
  readonly offset: number
  readonly generation?: string
}

/**
 * Validates a search request with the protocol's rules (`parseSearchTerms`:
 * distinct words of letters and digits, bounded text and term count, typed
 * errors), shared by every backend; the words reach `plainto_tsquery` as a
 * parameter, so nothing is syntax. Cursors are bound to the request and to
 * the index generation they were issued for.
 */
export function parseSearchRequest(input: unknown, kind: 'sessions' | 'events'): ParsedSearch {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw invalidFilter('a search request must be an object { text, limit?, cursor? }')
  const raw = input as Record<string, unknown>
  for (const key of Object.keys(raw))
    if (key !== 'text' && key !== 'limit' && key !== 'cursor') throw invalidFilter(`unknown search field '${key}'`)
  const words = parseSearchTerms(raw.text)
  let limit = SEARCH_PAGE_DEFAULT_LIMIT
  if (raw.limit !== undefined) {
    if (typeof raw.limit !== 'number' || !Number.isSafeInteger(raw.limit) || raw.limit < 1 || raw.limit > SEARCH_PAGE_MAX_LIMIT)
      throw invalidFilter(`limit must be an integer from 1 to ${SEARCH_PAGE_MAX_LIMIT}`)
    limit = raw.limit
  }
  const digest = requestDigest([kind, words])
  if (raw.cursor === undefined) return { words, digest, limit, offset: 0 }
  const payload = decodeCursor(raw.cursor, ['v', 'kind', 'q', 'g', 'o'])
  if (payload.v !== 1 || payload.kind !== `pg-search-${kind}`) throw invalidCursor(`it is not a ${kind} search cursor`)
  if (payload.q !== digest) throw invalidCursor('it was issued for a different search')
  const { g, o } = payload
  if (typeof g !== 'string' || typeof o !== 'number' || !Number.isSafeInteger(o) || o < 1 || o > MAX_OFFSET)
    throw invalidCursor('its position is malformed')
  return { words, digest, limit, offset: o, generation: g }
}

/** Rejects a cursor issued before the index changed: its page would skip or repeat hits. */
export function checkGeneration(search: ParsedSearch, generation: string): void {
  if (search.generation !== undefined && search.generation !== generation) {
    throw new SessionQueryError(
      'SESSION_QUERY_STALE_CURSOR',
      'The search index changed since this cursor was issued (sessions were added, changed or re-indexed); run the search again from its first page.',
    )
  }
}

export function encodeSearchCursor(
  kind: 'sessions' | 'events',
  search: ParsedSearch,
  generation: string,
  offset: number,
): string | undefined {
  return offset > MAX_OFFSET ? undefined : encodeCursor({ v: 1, kind: `pg-search-${kind}`, q: search.digest, g: generation, o: offset })
}
