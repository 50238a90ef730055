import type { Route } from './route.js'
import type { StreamReadyBody } from './schemas.js'
import { SseStream } from './sse.js'

/**
 * `GET /api/sessions/:id/stream`: Server-Sent Events of the session's
 * projection changes and of catalog changes below it. Accepts `?token=`
 * because `EventSource` cannot set headers. Opening a stream reads no log, so
 * a stream for an id that does not exist (yet) simply stays quiet.
 */
export const streamRoute: Route = {
  path: ['api', 'sessions', ':id', 'stream'],
  auth: 'header-or-query',
  query: [],
  handle({ res, params, streams, limits }) {
    const sessionId = params.id!
    streams.reserve()
    const stream = new SseStream(res, { heartbeatMs: limits.heartbeatMs, maxBacklogBytes: limits.maxStreamBacklogBytes })
    streams.add(sessionId, stream)
    const ready: StreamReadyBody = { sessionId }
    stream.send('ready', ready)
  },
}
