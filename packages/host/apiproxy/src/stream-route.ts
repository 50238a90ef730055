import { routes } from '@dsh/protocol'
import { streamingRoute } from './route.js'
import { SSE_HEADERS, SseStream } from './sse.js'

/**
 * `GET /api/sessions/:id/stream`: Server-Sent Events of the session's
 * projection changes and of catalog changes below it. Accepts `?token=`
 * because `EventSource` cannot set headers. Opening a stream reads no log, so
 * a stream for an id that does not exist (yet) simply stays quiet. A
 * subagent's id is served too, without an owner check: its stream carries
 * only ids (`catalog` and `written` notices about it and the sessions below
 * it), never its own projection views, which the hub withholds from every
 * subagent's stream (`StreamHub`); the page follows a subagent's trace on it.
 * HEAD gets the stream's head and ends: it takes no stream slot, and a
 * response that never ends would never send its head.
 */
export const streamRoute = streamingRoute(routes.stream, ({ req, res, params, streams, limits }) => {
  if (req.method === 'HEAD') {
    res.writeHead(200, SSE_HEADERS).end()
    return
  }
  streams.reserve()
  const stream = new SseStream(res, { heartbeatMs: limits.heartbeatMs, maxBacklogBytes: limits.maxStreamBacklogBytes })
  streams.add(params.id, stream)
  stream.send({ event: 'ready', data: { sessionId: params.id } })
})
