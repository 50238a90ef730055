import { type Server, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { HTTP_RETRY_AFTER_SECONDS } from '@dsh/protocol/limits'
import { ApiError } from './errors.js'
import { BASE_HEADERS } from './http.js'
import type { ApiLimits } from './limits.js'

/** The connections of one server: how many are open, which were refused, and a way to end them all. */
export interface ConnectionGuard {
  /** Open sockets: the ones served and the ones being refused. */
  readonly open: number
  /** True for a socket over the connection cap: it was answered `503` and is closing, and no request on it is served. */
  refused(socket: Socket): boolean
  /** Destroys every open socket (server shutdown). */
  destroyAll(): void
}

/**
 * The `node:http` server options that bound how long a client may take: an
 * idle keep-alive connection is closed after `idleTimeoutMs`, and a request
 * whose headers (or whole request) did not arrive in time gets `408`.
 */
export function timeoutOptions(limits: ApiLimits) {
  return {
    keepAliveTimeout: limits.idleTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // Node checks the two request deadlines on this interval (30 s unless set), so
    // a deadline is enforced at most a quarter of the headers timeout (or 1 s) late.
    connectionsCheckingInterval: Math.max(1, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
  }
}

/**
 * Counts the server's connections as they arrive and answers the ones over
 * `maxConnections` with `503 API_TOO_MANY_CONNECTIONS` (and `Retry-After`)
 * before closing them: `server.maxConnections` would drop them without a
 * word. Also answers the errors `node:http` reports before a request exists
 * (malformed request 400, oversized headers 431, headers or request not
 * received in time 408) and closes those connections.
 */
export function guardConnections(server: Server, limits: ApiLimits): ConnectionGuard {
  const sockets = new Set<Socket>()
  const refused = new WeakSet<Socket>()
  let served = 0
  // Prepended, so the count is taken before `node:http` starts reading the socket.
  server.prependListener('connection', (socket: Socket) => {
    sockets.add(socket)
    if (served >= limits.maxConnections) {
      refused.add(socket)
      socket.once('close', () => sockets.delete(socket))
      const error = new ApiError(
        'API_TOO_MANY_CONNECTIONS',
        `This host holds at most ${limits.maxConnections} connections at once and all are in use; retry in ${HTTP_RETRY_AFTER_SECONDS} s, or close idle connections.`,
      )
      answerAndClose(socket, error, { 'Retry-After': String(HTTP_RETRY_AFTER_SECONDS) }, limits.idleTimeoutMs)
      return
    }
    served += 1
    socket.once('close', () => {
      served -= 1
      sockets.delete(socket)
    })
  })
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    // A refused socket is already answering and closing itself.
    if (refused.has(socket)) return
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    answerAndClose(socket, clientError(error, limits), {}, limits.idleTimeoutMs)
  })
  return {
    get open() {
      return sockets.size
    },
    refused: (socket) => refused.has(socket),
    destroyAll() {
      for (const socket of sockets) socket.destroy()
    },
  }
}

function clientError(error: NodeJS.ErrnoException, limits: ApiLimits): ApiError {
  if (error.code === 'HPE_HEADER_OVERFLOW') return new ApiError('API_HEADERS_TOO_LARGE', 'The request headers are too large.')
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return new ApiError(
      'API_REQUEST_TIMEOUT',
      `The request did not arrive in time: this host waits ${limits.headersTimeoutMs} ms for the headers and ${limits.requestTimeoutMs} ms for the whole request.`,
    )
  return new ApiError('API_BAD_REQUEST', 'The request is not valid HTTP/1.1.')
}

/**
 * Writes `error` as a complete HTTP answer straight to the socket (there is no
 * response object before a request exists) and destroys the socket once the
 * answer is handed to the kernel. Ending alone would leave it half-open for
 * as long as the client keeps its side open (`node:http` allows half-open
 * sockets). A client that does not read gets `fallbackMs` before the socket
 * is destroyed anyway.
 */
function answerAndClose(socket: Socket, error: ApiError, headers: Record<string, string>, fallbackMs: number): void {
  const body = JSON.stringify(error.toJSON())
  const fields = {
    ...BASE_HEADERS,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    ...headers,
    Connection: 'close',
  }
  const head = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`,
    ...Object.entries(fields).map(([name, value]) => `${name}: ${value}`),
  ]
  const fallback = setTimeout(() => socket.destroy(), fallbackMs).unref()
  socket.once('close', () => clearTimeout(fallback))
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy())
}
