import { ApiError } from './errors.js'
import { sendJson } from './http.js'
import type { Route } from './route.js'
import type { SearchPageBody } from './schemas.js'
import { wireEventHit, wireSessionHit } from './wire.js'

/** Longest search text accepted. */
const MAX_QUERY_LENGTH = 1024

/** `GET /api/search?q&kind=sessions|events&limit&cursor`: full-text search over the query index. */
export const searchRoute: Route = {
  path: ['api', 'search'],
  auth: 'header',
  query: ['q', 'kind', 'limit', 'cursor'],
  async handle({ res, query, signal, services, limits }) {
    const text = query.string('q')?.trim() ?? ''
    if (text.length === 0) throw new ApiError('API_BAD_REQUEST', 'Search needs a non-empty "q" parameter.')
    if (text.length > MAX_QUERY_LENGTH) throw new ApiError('API_BAD_REQUEST', `The search text is ${text.length} characters long; the limit is ${MAX_QUERY_LENGTH}.`)
    const kind = query.choice('kind', ['sessions', 'events'] as const) ?? 'sessions'
    const cursor = query.string('cursor')
    const request = {
      text,
      limit: query.integer('limit', 1, limits.maxPageSize) ?? limits.defaultPageSize,
      ...(cursor === undefined ? {} : { cursor }),
    }
    const { sessionQuery } = services
    let body: SearchPageBody
    if (kind === 'sessions') {
      if (sessionQuery.searchSessions === undefined) throw unavailable()
      const page = await sessionQuery.searchSessions(request, signal)
      body = { kind, hits: page.hits.map(wireSessionHit), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) }
    } else {
      if (sessionQuery.searchEvents === undefined) throw unavailable()
      const page = await sessionQuery.searchEvents(request, signal)
      body = { kind, hits: page.hits.map(wireEventHit), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) }
    }
    sendJson(res, 200, body)
  },
}

function unavailable(): ApiError {
  return new ApiError('API_SEARCH_UNAVAILABLE', "This host's query backend has no full-text index; run it with the SQLite query backend to search.")
}
