import { routes, type SessionStatsReportBody } from '@dsh/protocol'
import { sessionStatsReport } from '@dsh/session-stats'
import { ApiError } from './errors.js'
import { jsonRoute } from './route.js'

const KEYS = ['sessionStats', 'sessionTitle'] as const

/**
 * `GET /api/sessions/:id/stats?scope=session|descendants`: usage, timing and
 * titles of a session, or summed over its whole tree, read through the
 * catalog's ladder (a warm checkpoint cache costs no body read). Sessions
 * that cannot be read are gaps of the rollup, never dropped. The server's
 * price table (`services.prices`) prices the totals; without one `cost` is
 * `null` with `costReason: 'no-price-table'`.
 */
export const sessionStatsRoute = jsonRoute(routes.sessionStats, async ({ params, query, signal, services }) => {
  const catalog = services.subagents
  if (catalog.treeSnapshots === undefined)
    throw new ApiError('API_SERVICE_UNAVAILABLE', "This server's subagent service cannot read session trees (no treeSnapshots).")
  const scope = query.scope ?? 'session'
  const entries = await catalog.treeSnapshots(params.id, KEYS, { descendants: scope === 'descendants', signal })
  // The report's arrays are readonly and its unions narrower than the wire type's; tests parse the answer with the protocol's schema.
  return sessionStatsReport(params.id, scope, entries, services.prices) as unknown as SessionStatsReportBody
})
