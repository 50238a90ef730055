import { isDshError } from '@dsh/context'
import { routes } from '@dsh/protocol'
import { catalogListingCosts, type ListingCost } from '@dsh/session-stats'
import { ApiError } from './errors.js'
import { isListedChild, isNotFound } from './owner.js'
import { jsonRoute } from './route.js'
import type { ApiServices } from './services.js'
import { historyRequest } from './session-routes.js'
import { capHistoryPage, wireHistory, wireSubagentList } from './wire.js'

/**
 * `GET /api/sessions/:id/subagents?scope=children|descendants`: the subagent
 * catalog of a session, descendants in pre-order. A server with a price
 * table (`services.prices`) gives each row its `cost`, priced as the session
 * listing prices an entry; without one the rows carry no `cost`, so the body
 * equals `dsh agents --json`'s.
 */
export const subagentsRoute = jsonRoute(routes.subagents, async ({ params, query, signal, services }) => {
  const scope = query.scope ?? 'children'
  const rows =
    scope === 'children'
      ? await services.subagents.explainChildren(params.id, signal)
      : await services.subagents.explainDescendants(params.id, signal)
  if (services.prices === undefined || rows.length === 0) return wireSubagentList(params.id, scope, rows)
  const costs = await rowCosts(services, params.id, scope, signal)
  return wireSubagentList(
    params.id,
    scope,
    rows.map((row) => ({ ...row, ...(costs?.get(row.row.id) ?? UNPRICED) })),
  )
})

/** A row the tree read did not reach (a catalog that cannot read trees, or a root gone since its rows were listed). */
const UNPRICED: ListingCost = Object.freeze({ cost: null, costReason: 'stats-unavailable' })

/**
 * The cost of every row of `scope` under `rootId` (`catalogListingCosts`: the
 * listing's pricing of each session's `sessionStats`, read down the catalog's
 * ladder no deeper than the rows go), or `undefined` when nothing can be
 * priced: a catalog that cannot read trees, or a root gone since its rows
 * were listed (every row's cost is then `null`).
 */
async function rowCosts(
  services: ApiServices,
  rootId: string,
  scope: 'children' | 'descendants',
  signal: AbortSignal,
): Promise<Map<string, ListingCost> | undefined> {
  const { prices, subagents } = services
  const trees = subagents.treeSnapshots
  if (prices === undefined || trees === undefined) return undefined
  try {
    return await catalogListingCosts({ treeSnapshots: trees.bind(subagents) }, rootId, scope, prices, signal)
  } catch (error) {
    if (isDshError(error, 'SUBAGENT_NOT_FOUND')) return undefined
    throw error
  }
}

/**
 * `GET /api/sessions/:parentId/subagents/:childId/history`: a child's history,
 * served only through its parent's catalog. The owner check (the child is
 * listed as a subagent of the parent: header facts only) runs before any read
 * of the child's data, and the header observed with the events must still say
 * so after it (the session may have been deleted and republished under the
 * same id in between). A refusal is the same 404 whether the child is missing,
 * belongs to another parent, is no subagent at all or is damaged, and carries
 * no event data.
 */
export const childHistoryRoute = jsonRoute(routes.childHistory, async ({ params, query, signal, services, limits }) => {
  const { parentId, childId } = params
  const notFound = (): ApiError => new ApiError('API_NOT_FOUND', `Session '${parentId}' has no subagent '${childId}'.`)
  if (!(await isListedChild(services.sessionQuery, parentId, childId, signal))) throw notFound()
  let page: Awaited<ReturnType<typeof services.sessionQuery.readHistory>>
  try {
    page = await services.sessionQuery.readHistory(childId, historyRequest(query), signal)
  } catch (error) {
    // Gone between the listing and the read: the same answer as never listed.
    if (isNotFound(error)) throw notFound()
    throw error
  }
  if (page.header.origin !== 'subagent' || page.header.parentSession !== parentId) throw notFound()
  return capHistoryPage(wireHistory(page), limits.maxHistoryPageBytes)
})
