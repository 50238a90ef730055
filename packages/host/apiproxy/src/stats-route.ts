import { routes, type SessionStatsReportBody } from '@dsh/protocol'
import { sessionStatsReport } from '@dsh/session-stats'
import { wireProblem } from './error-response.js'
import { ApiError } from './errors.js'
import { jsonRoute } from './route.js'

const KEYS = ['sessionStats', 'sessionTitle'] as const

/**
 * `GET /api/sessions/:id/stats?scope=session|descendants`: usage, timing and
 * titles of a session, or summed over its whole tree, read through the
 * catalog's ladder (a warm checkpoint cache costs no body read). Sessions
 * that cannot be read are gaps of the rollup, never dropped; their problems
 * go on the wire as error answers do (`wireProblem`: no file names or byte
 * offsets), and whole to the server log. The server's price table
 * (`services.prices`) prices the totals; without one `cost` is `null` with
 * `costReason: 'no-price-table'`.
 */
export const sessionStatsRoute = jsonRoute(routes.sessionStats, async ({ params, query, signal, services, logger }) => {
  const catalog = services.subagents
  if (catalog.treeSnapshots === undefined)
    throw new ApiError('API_SERVICE_UNAVAILABLE', "This server's subagent service cannot read session trees (no treeSnapshots).")
  const scope = query.scope ?? 'session'
  const entries = await catalog.treeSnapshots(params.id, KEYS, { descendants: scope === 'descendants', signal })
  const report = sessionStatsReport(params.id, scope, entries, services.prices)
  const problems = report.sessions.flatMap((session) =>
    session.problem === undefined ? [] : [{ id: session.id, problem: session.problem }],
  )
  if (problems.length > 0)
    logger.warn(
      `dsh apiproxy: the stats of '${params.id}' have ${problems.length} unreadable session(s); the answer carries no details.`,
      problems,
    )
  const answer = {
    ...report,
    sessions: report.sessions.map((session) =>
      session.problem === undefined ? session : { ...session, problem: wireProblem(session.problem) },
    ),
    rollup: {
      ...report.rollup,
      gaps: report.rollup.gaps.map((gap) => (gap.problem === undefined ? gap : { ...gap, problem: wireProblem(gap.problem) })),
    },
  }
  // The report's arrays are readonly and its unions narrower than the wire type's; tests parse the answer with the protocol's schema.
  return answer as unknown as SessionStatsReportBody
})
