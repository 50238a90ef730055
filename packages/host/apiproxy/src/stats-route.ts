import { routes, type SessionStatsReportBody } from '@dsh/protocol'
import { reportSessionStats } from '@dsh/session-stats'
import { wireProblem } from './error-response.js'
import { ApiError } from './errors.js'
import { isSubagent } from './owner.js'
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
 *
 * The root must not be a subagent: a subagent's usage and title belong to its
 * parent's catalog (its row there: `GET /api/sessions/{parentId}/subagents`)
 * and to the tree report of its top-level session, which lists it as an
 * entry.
 * The owner check runs on header facts before the read and again on the
 * header the read used (the id may have been republished in between), as the
 * history route's does; a refusal carries no session data.
 */
export const sessionStatsRoute = jsonRoute(routes.sessionStats, async ({ params, query, signal, services, logger }) => {
  const catalog = services.subagents
  if (catalog.treeSnapshots === undefined)
    throw new ApiError('API_SERVICE_UNAVAILABLE', "This server's subagent service cannot read session trees (no treeSnapshots).")
  const forbidden = (): ApiError =>
    new ApiError(
      'API_FORBIDDEN',
      `Session '${params.id}' is a subagent; its usage is served only through its parent's catalog: GET /api/sessions/{parentId}/subagents, or the stats of its top-level session with scope=descendants.`,
    )
  if (await isSubagent(services, params.id, signal)) throw forbidden()
  const scope = query.scope ?? 'session'
  const entries = await catalog.treeSnapshots(params.id, KEYS, { descendants: scope === 'descendants', signal })
  // The root entry's flag is the header its values were read with.
  if (entries[0]?.subagent === true) throw forbidden()
  const report = reportSessionStats(params.id, scope, entries, services.prices)
  const problems = report.sessions.flatMap((session) =>
    session.problem === undefined ? [] : [{ id: session.id, problem: session.problem }],
  )
  if (problems.length > 0)
    logger.warn(
      `dsh: the HTTP API's stats of '${params.id}' have ${problems.length} unreadable session(s); the answer carries no details.`,
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
