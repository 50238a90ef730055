import { PAGE_DEFAULT_LIMIT, routes } from '@dsh/protocol'
import type { HistoryPageRequest, SessionListFilter } from '@dsh/session-query'
import { listedValues } from '@dsh/session-stats'
import { ApiError } from './errors.js'
import { isSubagent } from './owner.js'
import { jsonRoute } from './route.js'
import { capHistoryPage, wireHistory, wireSessionList } from './wire.js'

/**
 * `GET /api/sessions`: a page of the live-preferred corpus, each session with
 * its title, tokens and cost as far as they are known without reading a log
 * (a live session's own views, else its checkpoint row); `cost` is priced by
 * the server's price table (`services.prices`), `null` without one.
 */
export const listSessionsRoute = jsonRoute(routes.listSessions, async ({ query, signal, services }) => {
  const { parentSession, origin, cwd, createdFrom, createdTo, cursor, limit } = query
  const filter: SessionListFilter = {
    limit: limit ?? PAGE_DEFAULT_LIMIT,
    ...(parentSession === undefined ? {} : { parentSession }),
    ...(origin === undefined ? {} : { origin }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(createdFrom === undefined && createdTo === undefined
      ? {}
      : {
          createdAt: { ...(createdFrom === undefined ? {} : { from: createdFrom }), ...(createdTo === undefined ? {} : { to: createdTo }) },
        }),
    ...(cursor === undefined ? {} : { cursor }),
  }
  const page = await services.sessionQuery.listSessions(filter, signal)
  const values = listedValues(
    page.records,
    { sessions: services.sessions, projections: services.sessionProjections, cache: services.sessionProjectionCache },
    services.prices,
  )
  return wireSessionList(page, values)
})

/** The service request of a history route's `before` / `limit`. */
export function historyRequest(query: { readonly before?: number | undefined; readonly limit?: number | undefined }): HistoryPageRequest {
  return { limit: query.limit ?? PAGE_DEFAULT_LIMIT, ...(query.before === undefined ? {} : { before: query.before }) }
}

/**
 * `GET /api/sessions/:id/history`: for sessions that are not subagents. A
 * subagent's history belongs to its parent's catalog. The owner check runs on
 * header facts before the read (so a corrupt or unreadable subagent is refused
 * exactly like a healthy one), and again on the header observed with the
 * events (the id may have been republished in between); a refusal carries no
 * event data.
 */
export const historyRoute = jsonRoute(routes.history, async ({ params, query, signal, services, limits }) => {
  const forbidden = (): ApiError =>
    new ApiError(
      'API_FORBIDDEN',
      `Session '${params.id}' is a subagent; its history is served only through its parent's catalog: GET /api/sessions/{parentId}/subagents/{childId}/history.`,
    )
  if (await isSubagent(services, params.id, signal)) throw forbidden()
  const page = await services.sessionQuery.readHistory(params.id, historyRequest(query), signal)
  if (page.header.origin === 'subagent') throw forbidden()
  return capHistoryPage(wireHistory(page), limits.maxHistoryPageBytes)
})
