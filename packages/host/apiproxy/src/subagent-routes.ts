import type { SessionQuery } from '@dsh/session-query'
import { ApiError } from './errors.js'
import { sendJson } from './http.js'
import type { Route } from './route.js'
import type { SubagentListBody } from './schemas.js'
import { historyRequest } from './session-routes.js'
import { listSubagentRows } from './subagent-tree.js'
import { wireHistory } from './wire.js'

/** `GET /api/sessions/:id/subagents?scope=children|descendants`: the subagent catalog of a session. */
export const subagentsRoute: Route = {
  path: ['api', 'sessions', ':id', 'subagents'],
  auth: 'header',
  query: ['scope'],
  async handle({ res, params, query, signal, services }) {
    const parentId = params.id!
    const scope = query.choice('scope', ['children', 'descendants'] as const) ?? 'children'
    const rows = await listSubagentRows(services.subagents, parentId, scope, signal)
    const body: SubagentListBody = { parentId, scope, rows }
    sendJson(res, 200, body)
  },
}

/**
 * `GET /api/sessions/:parentId/subagents/:childId/history`: a child's history,
 * served only through its parent's catalog. The child must be enumerated as a
 * subagent of the parent before the read, and the header observed with the
 * events must still say so after it (the session may have been deleted and
 * republished under the same id in between). A refusal is the same 404 whether
 * the child is missing, belongs to another parent or is no subagent at all, and
 * carries no event data.
 */
export const childHistoryRoute: Route = {
  path: ['api', 'sessions', ':parentId', 'subagents', ':childId', 'history'],
  auth: 'header',
  query: ['before', 'limit'],
  async handle(rc) {
    const parentId = rc.params.parentId!
    const childId = rc.params.childId!
    const notFound = (): ApiError => new ApiError('API_NOT_FOUND', `Session '${parentId}' has no subagent '${childId}'.`)
    if (!(await isListedChild(rc.services.sessionQuery, parentId, childId, rc.signal))) throw notFound()
    let page
    try {
      page = await rc.services.sessionQuery.readHistory(childId, historyRequest(rc), rc.signal)
    } catch (error) {
      // Gone between the listing and the read: the same answer as never listed.
      if (error instanceof Error && (error as { code?: unknown }).code === 'SESSION_QUERY_NOT_FOUND') throw notFound()
      throw error
    }
    if (page.header.origin !== 'subagent' || page.header.parentSession !== parentId) throw notFound()
    sendJson(rc.res, 200, wireHistory(page))
  },
}

/** True when the corpus lists `childId` among the subagent sessions whose parent is `parentId`. */
async function isListedChild(query: SessionQuery, parentId: string, childId: string, signal: AbortSignal): Promise<boolean> {
  let cursor: string | undefined
  do {
    const page = await query.listSessions({ parentSession: parentId, origin: 'subagent', limit: 1000, ...(cursor === undefined ? {} : { cursor }) }, signal)
    if (page.records.some((record) => record.header.id === childId)) return true
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return false
}
