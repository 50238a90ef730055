import type { CompactionResultBody } from '@dsh/protocol'
import { routes } from '@dsh/protocol'
import { type Session, SessionId } from '@dsh/session'
import { ApiError } from './errors.js'
import { isSubagent } from './owner.js'
import { jsonRoute } from './route.js'
import type { ApiServices } from './services.js'

/** What `compact` writes on `compaction/start` as its reason. */
export const HTTP_COMPACTION_REASON = 'http'

/**
 * `POST /api/sessions/:id/compact?keep=N`: one compaction of the session's
 * model-visible context by the host's `compaction` service; the answer is the
 * shadowed event range and the estimated tokens before and after. The route
 * acts only on sessions that are not subagents (a subagent's context belongs
 * to its parent's run), decided on header facts before anything is loaded.
 * A session that is not live is loaded as a writer for the compaction (the
 * load closes a compaction a crash left open; a session another process
 * writes is refused with `SESSION_PERSISTENCE_LOCKED`, 409) and taken out of
 * memory again afterwards. Its writer lock stays with the persistence
 * backend like every writer's (released least recently used first, and when
 * the server stops). Without a compaction service the route answers
 * `API_COMPACTION_UNAVAILABLE` (501).
 */
export const compactRoute = jsonRoute(routes.compact, async ({ params, query, signal, services }): Promise<CompactionResultBody> => {
  const { compaction, sessions, sessionLoader } = services
  if (compaction === undefined || sessions === undefined || sessionLoader === undefined)
    throw new ApiError(
      'API_COMPACTION_UNAVAILABLE',
      "This server's host has no compaction service: serve it with a model that writes summaries (dsh serve with DSH_API_KEY set).",
    )
  if (await isSubagent(services, params.id, signal))
    throw new ApiError(
      'API_FORBIDDEN',
      `Session '${params.id}' is a subagent; its context is compacted by its parent's run, not over HTTP.`,
    )
  const { session, loaded } = await liveSession(services, params.id, signal)
  try {
    if (session.header.origin === 'subagent')
      throw new ApiError(
        'API_FORBIDDEN',
        `Session '${params.id}' is a subagent; its context is compacted by its parent's run, not over HTTP.`,
      )
    const result = await compaction.compact(session, {
      reason: HTTP_COMPACTION_REASON,
      signal,
      ...(query.keep === undefined ? {} : { keep: query.keep }),
    })
    return { id: session.id, ...result }
  } finally {
    // Flushes what the compaction appended and takes the session out of memory: the server keeps live only what it kept before.
    if (loaded) await sessions.dispose(session.id)
  }
})

/** The live session `id`, loading it (crash repair included) when it is not live; `loaded` when this call made it live. */
async function liveSession(
  services: ApiServices,
  id: string,
  signal: AbortSignal,
): Promise<{ readonly session: Session; readonly loaded: boolean }> {
  const sessions = services.sessions!
  const live = sessions.get(id)
  if (live !== undefined) return { session: live, loaded: false }
  const restored = await services.sessionLoader!.load(SessionId(id), signal)
  // Another request may have made it live while this one loaded it: that request owns it.
  const raced = sessions.get(id)
  if (raced !== undefined) return { session: raced, loaded: false }
  return { session: sessions.restore(restored), loaded: true }
}
