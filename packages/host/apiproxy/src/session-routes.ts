import type { SessionListFilter } from '@dsh/session-query'
import { ApiError } from './errors.js'
import { sendJson } from './http.js'
import type { Route, RouteContext } from './route.js'
import type { SessionListPageBody } from './schemas.js'
import { wireHistory, wireRecord } from './wire.js'

const MAX_EPOCH = Number.MAX_SAFE_INTEGER

/** `GET /api/sessions`: a page of the live-preferred corpus. */
export const listSessionsRoute: Route = {
  path: ['api', 'sessions'],
  auth: 'header',
  query: ['parentSession', 'origin', 'cwd', 'createdFrom', 'createdTo', 'limit', 'cursor'],
  async handle({ res, query, signal, services, limits }) {
    const parentSession = query.id('parentSession')
    const origin = query.choice('origin', ['subagent'] as const)
    const cwd = query.string('cwd')
    const from = query.integer('createdFrom', 0, MAX_EPOCH)
    const to = query.integer('createdTo', 0, MAX_EPOCH)
    const cursor = query.string('cursor')
    const filter: SessionListFilter = {
      limit: query.integer('limit', 1, limits.maxPageSize) ?? limits.defaultPageSize,
      ...(parentSession === undefined ? {} : { parentSession }),
      ...(origin === undefined ? {} : { origin }),
      ...(cwd === undefined ? {} : { cwd }),
      ...(from === undefined && to === undefined ? {} : { createdAt: { ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) } }),
      ...(cursor === undefined ? {} : { cursor }),
    }
    const page = await services.sessionQuery.listSessions(filter, signal)
    const body: SessionListPageBody = {
      sessions: page.records.map(wireRecord),
      ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }),
    }
    sendJson(res, 200, body)
  },
}

/** Reads `before`/`limit` of a history route. */
export function historyRequest(rc: RouteContext): { before?: number; limit: number } {
  const before = rc.query.integer('before', 0, Number.MAX_SAFE_INTEGER)
  const limit = rc.query.integer('limit', 1, rc.limits.maxPageSize) ?? rc.limits.defaultPageSize
  return { limit, ...(before === undefined ? {} : { before }) }
}

/**
 * `GET /api/sessions/:id/history`: for sessions that are not subagents. A
 * subagent's history belongs to its parent's catalog; the check runs on the
 * header observed with the events, and a refusal carries none of them.
 */
export const historyRoute: Route = {
  path: ['api', 'sessions', ':id', 'history'],
  auth: 'header',
  query: ['before', 'limit'],
  async handle(rc) {
    const id = rc.params.id!
    const page = await rc.services.sessionQuery.readHistory(id, historyRequest(rc), rc.signal)
    if (page.header.origin === 'subagent') {
      throw new ApiError(
        'API_FORBIDDEN',
        `Session '${id}' is a subagent; its history is served only through its parent's catalog: GET /api/sessions/{parentId}/subagents/{childId}/history.`,
      )
    }
    sendJson(rc.res, 200, wireHistory(page))
  },
}
