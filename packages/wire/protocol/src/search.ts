import { z } from 'zod'
import { SEARCH_MAX_TERMS, SEARCH_MAX_TEXT, SEARCH_PAGE_MAX_LIMIT, searchTerms } from './limits.js'
import { choiceParam, cursorParam, intParam, nonNegativeInt, sessionId } from './primitives.js'
import { sessionRecord } from './session.js'

/**
 * Search text: at most `SEARCH_MAX_TEXT` characters holding at least one and
 * at most `SEARCH_MAX_TERMS` distinct terms (see `searchTerms`).
 */
export const searchText = z
  .string()
  .max(SEARCH_MAX_TEXT, { error: `is longer than ${SEARCH_MAX_TEXT} characters` })
  .superRefine((text, ctx) => {
    if (text.length > SEARCH_MAX_TEXT) return
    const terms = searchTerms(text).length
    if (terms === 0) ctx.addIssue({ code: 'custom', message: 'holds no word to search for (letters or digits)', input: text })
    else if (terms > SEARCH_MAX_TERMS)
      ctx.addIssue({
        code: 'custom',
        message: `holds ${terms} distinct words; at most ${SEARCH_MAX_TERMS} are searched at once`,
        input: text,
      })
  })

/** A search request as a query backend takes it (`searchSessions` / `searchEvents`). */
export const searchRequest = z.object({
  text: searchText,
  limit: z.number().int().min(1).max(SEARCH_PAGE_MAX_LIMIT).optional(),
  /** From a previous page of the same search. */
  cursor: cursorParam.optional(),
})

export const searchKind = z.enum(['sessions', 'events'])

/** Query parameters of `GET /api/search`. */
export const searchQuery = z.object({
  q: searchText,
  kind: choiceParam(['sessions', 'events']).optional(),
  limit: intParam(1, SEARCH_PAGE_MAX_LIMIT).optional(),
  cursor: cursorParam.optional(),
})

/** A matching session: its live-preferred record, its best event score and how many of its events match. */
export const sessionSearchHit = z.object({
  record: sessionRecord,
  score: z.number(),
  matches: nonNegativeInt,
})

/**
 * A matching event; `snippet` marks matched words in `[…]`, and `marks` says
 * where each match's `[…]` is (`[start, end)` in UTF-16 code units, the
 * brackets included): brackets elsewhere in the snippet are the text's own.
 */
export const eventSearchHit = z.object({
  id: sessionId,
  seq: nonNegativeInt,
  type: z.string(),
  snippet: z.string(),
  marks: z.array(z.tuple([nonNegativeInt, nonNegativeInt])),
  score: z.number(),
})

export const searchPage = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('sessions'), hits: z.array(sessionSearchHit), nextCursor: z.string().optional() }),
  z.object({ kind: z.literal('events'), hits: z.array(eventSearchHit), nextCursor: z.string().optional() }),
])
