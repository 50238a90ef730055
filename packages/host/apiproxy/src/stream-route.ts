import { routes } from '@dsh/protocol'
import { streamingRoute } from './route.js'
import { SseStream } from './sse.js'

/**
 * `GET /api/sessions/:id/stream`: Server-Sent Events of the session's
 * projection changes and of catalog changes below it. Accepts `?token=`
 * because `EventSource` cannot set headers. Opening a stream reads no log, so
 * a stream for an id that does not exist (yet) simply stays quiet.
 */
export const streamRoute = streamingRoute(routes.stream, ({ res, params, streams, limits }) => {
  streams.reserve()
  const stream = new SseStream(res, { heartbeatMs: limits.heartbeatMs, maxBacklogBytes: limits.maxStreamBacklogBytes })
  streams.add(params.id, stream)
  stream.send({ event: 'ready', data: { sessionId: params.id } })
})
