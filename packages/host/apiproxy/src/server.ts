import { setMaxListeners } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { consoleLogger, type Context, type Logger } from '@dsh/context'
import { authenticate, createTokenCheck } from './auth.js'
import { toErrorResponse } from './error-response.js'
import { ApiError } from './errors.js'
import { drainBody, sendError } from './http.js'
import { resolveLimits, type ApiLimits } from './limits.js'
import { pageRoutes } from './page-routes.js'
import { parseId, parseTarget } from './request.js'
import { matchRoute, type Route } from './route.js'
import { searchRoute } from './search-route.js'
import { resolveServices, type ApiEventSource, type ApiServices } from './services.js'
import { historyRoute, listSessionsRoute } from './session-routes.js'
import { StreamHub } from './stream-hub.js'
import { streamRoute } from './stream-route.js'
import { childHistoryRoute, subagentsRoute } from './subagent-routes.js'

export interface ApiHandlerOptions {
  /** Services are taken from here (`sessionQuery`, `subagents`, `sessions`, `sessionProjections`) unless `services` overrides them. */
  readonly ctx?: Context
  readonly services?: Partial<ApiServices>
  /** Session lifecycle events (`session/created`, `session/event`, `session/disposed`) for the stream; defaults to `ctx`. */
  readonly events?: ApiEventSource
  /** The bearer token every data route requires (at least 16 characters). */
  readonly token: string
  readonly limits?: Partial<ApiLimits>
  /** Where server faults are reported; defaults to the `logger` service, then the console. */
  readonly logger?: Logger
}

export interface ApiServerOptions extends ApiHandlerOptions {
  /** Interface to bind; default `127.0.0.1` (loopback only). */
  readonly host?: string
  /** Port to bind; default 0 (any free port; read it from `url`). */
  readonly port?: number
}

/** A request listener for `node:http` plus the resources it holds. */
export interface ApiHandler {
  (req: IncomingMessage, res: ServerResponse): void
  readonly limits: ApiLimits
  /** Ends every open event stream and stops listening to services. */
  close(): void
}

export interface ApiServer {
  /** `http://host:port`, without a trailing slash. */
  readonly url: string
  /** The catalog page with the token in its query (what `dsh serve` prints). */
  readonly pageUrl: string
  readonly host: string
  readonly port: number
  /** Ends event streams, stops accepting connections and closes open ones. */
  close(): Promise<void>
}

const routes: readonly Route[] = [...pageRoutes, listSessionsRoute, historyRoute, subagentsRoute, childHistoryRoute, streamRoute, searchRoute]

/** Builds the API's request listener over the given services (for mounting in an existing server). */
export function createApiHandler(options: ApiHandlerOptions): ApiHandler {
  const services = resolveServices(options.ctx, options.services)
  const limits = resolveLimits(options.limits)
  const check = createTokenCheck(options.token)
  const logger = options.logger ?? options.ctx?.get('logger') ?? consoleLogger
  const streams = new StreamHub(services, options.events ?? options.ctx, limits, logger)

  const respondError = (res: ServerResponse, error: unknown): void => {
    const response = toErrorResponse(error)
    if (response.serverFault) logger.error(`dsh apiproxy: request failed with ${response.body.code}.`, error)
    if (res.destroyed || res.writableEnded) return
    const headers: Record<string, string> = {}
    if (response.status === 401) headers['WWW-Authenticate'] = 'Bearer'
    if (response.status === 405) headers.Allow = 'GET'
    // The caller may still be sending a body we refused; do not read it, drop the connection after answering.
    if (response.status === 413 || response.status === 414) headers.Connection = 'close'
    sendError(res, response, headers)
  }

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const controller = new AbortController()
    // One request may fan out into many concurrent reads (a catalog's cold children), each listening for the abort.
    setMaxListeners(256, controller.signal)
    res.on('close', () => controller.abort())
    const target = parseTarget(req.url ?? '', limits)
    await drainBody(req, limits.maxBodyBytes)
    const match = matchRoute(routes, target.segments)
    authenticate(req, target.query, match?.route.auth ?? 'header-or-query', check)
    if (!match) throw new ApiError('API_NOT_FOUND', `No API route matches ${req.method ?? 'GET'} /${target.segments.map(encodeURIComponent).join('/')}.`)
    if (req.method !== 'GET') throw new ApiError('API_METHOD_NOT_ALLOWED', `This route answers GET only, not ${req.method ?? 'an unknown method'}.`)
    const { route, captures } = match
    target.query.allowOnly(route.auth === 'header-or-query' ? [...route.query, 'token'] : route.query)
    const params: Record<string, string> = {}
    for (const [name, value] of Object.entries(captures)) params[name] = parseId(value, `path parameter "${name}"`, limits)
    await route.handle({ req, res, params, query: target.query, signal: controller.signal, services, limits, streams })
  }

  const handler = ((req: IncomingMessage, res: ServerResponse): void => {
    serve(req, res).catch((error: unknown) => respondError(res, error))
  }) as ApiHandler
  Object.defineProperty(handler, 'limits', { value: limits })
  Object.defineProperty(handler, 'close', { value: () => streams.close() })
  return handler
}

/**
 * Starts the HTTP API and the catalog page on `node:http`. Binds 127.0.0.1 by
 * default; every data route requires the bearer token.
 */
export async function createApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const handler = createApiHandler(options)
  const host = options.host ?? '127.0.0.1'
  const port = options.port ?? 0
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) {
    handler.close()
    throw new ApiError('API_INVALID_OPTIONS', `port must be an integer from 0 to 65535, got ${String(port)}.`)
  }
  const server = createServer(
    {
      // Room for a request target up to the URL limit, so an over-long one gets our typed 414 instead of a bare 431.
      maxHeaderSize: handler.limits.maxUrlLength + 16 * 1024,
      requestTimeout: 30_000,
      headersTimeout: 15_000,
    },
    handler,
  )
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable) return
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400
    const body = JSON.stringify({
      code: status === 431 ? 'API_HEADERS_TOO_LARGE' : 'API_BAD_REQUEST',
      message: status === 431 ? 'The request headers are too large.' : 'The request is not valid HTTP/1.1.',
    })
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  }).catch((error: unknown) => {
    handler.close()
    const reason = (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error))
    throw new ApiError('API_LISTEN_FAILED', `Cannot listen on ${host}:${port} (${reason}); choose another port or host.`, { cause: error })
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new ApiError('API_INTERNAL', 'The server did not bind a TCP address.')
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
  let closing: Promise<void> | undefined
  return {
    url,
    pageUrl: `${url}/?token=${encodeURIComponent(options.token)}`,
    host: address.address,
    port: address.port,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        handler.close()
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      })
      return closing
    },
  }
}
