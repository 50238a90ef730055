import { routes, SEARCH_PAGE_DEFAULT_LIMIT, searchTerms } from '@dsh/protocol'
import type { SearchRequest } from '@dsh/session-query'
import { ApiError } from './errors.js'
import { jsonRoute } from './route.js'
import { wireEventSearch, wireSessionSearch } from './wire.js'

/**
 * `GET /api/search?q&kind=sessions|events&limit&cursor`: full-text search over
 * the query index. The protocol schema has already bounded the text and its
 * distinct terms; the backend is handed the distinct terms only, so a word
 * repeated 249 times costs what it costs once. Search names no session, so
 * it has no owner to check: it is corpus-wide for the token holder, subagents
 * included (their events are text that token reads through their parents'
 * catalogs anyway; a hit gives the id, and the page opens it through its
 * parent).
 */
export const searchRoute = jsonRoute(routes.search, async ({ query, signal, services }) => {
  const kind = query.kind ?? 'sessions'
  const request: SearchRequest = {
    text: searchTerms(query.q).join(' '),
    limit: query.limit ?? SEARCH_PAGE_DEFAULT_LIMIT,
    ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
  }
  const { sessionQuery } = services
  if (kind === 'sessions') {
    if (sessionQuery.searchSessions === undefined) throw unavailable()
    const page = await sessionQuery.searchSessions(request, signal)
    return wireSessionSearch(page)
  }
  if (sessionQuery.searchEvents === undefined) throw unavailable()
  const page = await sessionQuery.searchEvents(request, signal)
  return wireEventSearch(page)
})

function unavailable(): ApiError {
  return new ApiError(
    'API_SEARCH_UNAVAILABLE',
    "This host's query backend has no full-text index; run it with the SQLite query backend to search.",
  )
}
