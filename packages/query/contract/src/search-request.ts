import { SEARCH_PAGE_DEFAULT_LIMIT, SEARCH_PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { decodeCursor, encodeCursor, requestDigest } from './cursor.js'
import { SessionQueryError } from './errors.js'
import { invalidCursor, invalidFilter } from './failures.js'
import { parseSearchTerms } from './search-terms.js'

/** Past this many hits a search gives no next cursor: a deeper page costs more than it serves. */
export const SEARCH_MAX_OFFSET = 100_000

export type SearchKind = 'sessions' | 'events'

/** A validated search request, whatever index answers it. */
export interface ParsedSearchRequest {
  /** The distinct lower-case words (letters and digits) of the text, all required. */
  readonly words: readonly string[]
  /** Binds a cursor to the request it was issued for. */
  readonly digest: string
  readonly limit: number
  /** From the cursor: where this page starts (0 without one). */
  readonly offset: number
  /** From the cursor: the index generation it was issued for. */
  readonly generation?: string
}

/**
 * Validates a search request `{ text, limit?, cursor? }` the way every index
 * backend does: the protocol's term rules (`parseSearchTerms`), a limit of 1
 * to `SEARCH_PAGE_MAX_LIMIT`, no other field (`SESSION_QUERY_INVALID_FILTER`),
 * and a cursor of this backend (`cursorTag`, so one backend's cursor is never
 * read by another), this kind, this request and a sane position
 * (`SESSION_QUERY_INVALID_CURSOR`). Whether the cursor's generation is still
 * current is the backend's to check (`checkSearchGeneration`).
 */
export function parseSearchRequest(input: unknown, kind: SearchKind, cursorTag: string): ParsedSearchRequest {
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
  if (payload.v !== 1 || payload.kind !== `${cursorTag}-${kind}`) throw invalidCursor(`it is not a ${kind} search cursor`)
  if (payload.q !== digest) throw invalidCursor('it was issued for a different search')
  const { g, o } = payload
  if (typeof g !== 'string' || typeof o !== 'number' || !Number.isSafeInteger(o) || o < 1 || o > SEARCH_MAX_OFFSET)
    throw invalidCursor('its position is malformed')
  return { words, digest, limit, offset: o, generation: g }
}

/** Rejects a cursor issued before the index changed (`SESSION_QUERY_STALE_CURSOR`): its page would skip or repeat hits. */
export function checkSearchGeneration(search: ParsedSearchRequest, generation: string): void {
  if (search.generation !== undefined && search.generation !== generation) {
    throw new SessionQueryError(
      'SESSION_QUERY_STALE_CURSOR',
      'The search index changed since this cursor was issued (sessions were added, changed or re-indexed); run the search again from its first page.',
    )
  }
}

/** The cursor of the page at `offset` of this search and index generation; none past `SEARCH_MAX_OFFSET`. */
export function encodeSearchCursor(
  kind: SearchKind,
  cursorTag: string,
  search: ParsedSearchRequest,
  generation: string,
  offset: number,
): string | undefined {
  return offset > SEARCH_MAX_OFFSET
    ? undefined
    : encodeCursor({ v: 1, kind: `${cursorTag}-${kind}`, q: search.digest, g: generation, o: offset })
}
