import { setMaxListeners } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { isIP } from 'node:net'
import { type Context, consoleLogger, isDshError, type Logger } from '@dsh/context'
import { HTTP_RETRY_AFTER_SECONDS } from '@dsh/protocol/limits'
import { AnswerQueue } from './answers.js'
import { attachmentRoute, childAttachmentRoute } from './attachment-route.js'
import { authenticate, createTokenCheck } from './auth.js'
import { compactRoute } from './compaction-route.js'
import { guardConnections, timeoutOptions } from './connections.js'
import { toErrorResponse } from './error-response.js'
import { ApiError } from './errors.js'
import { createHostCheck } from './host-check.js'
import { drainBody, sendError } from './http.js'
import { type ApiLimits, resolveLimits } from './limits.js'
import { openApiRoute } from './openapi-route.js'
import { pageRoutes } from './page-routes.js'
import { parseTarget } from './request.js'
import { findRoute, type Route } from './route.js'
import { searchRoute } from './search-route.js'
import { type ApiEventSource, type ApiServices, resolveServices } from './services.js'
import { historyRoute, listSessionsRoute } from './session-routes.js'
import { sessionStatsRoute } from './stats-route.js'
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
  /** Where server faults and the details kept off the wire are reported; defaults to the `logger` service, then the console. */
  readonly logger?: Logger
  /**
   * Host names (besides 127.0.0.1, localhost, [::1] and the address a request
   * arrived on) that requests may name in `Host`; any other gets 421.
   */
  readonly allowedHosts?: readonly string[]
}

export interface ApiListenOptions {
  /** Interface to bind; default `127.0.0.1` (loopback only). A host name must be one of the handler's `allowedHosts`. */
  readonly host?: string
  /** Port to bind; default 0 (any free port; read it from `url`). */
  readonly port?: number
}

export interface ApiServerOptions extends ApiHandlerOptions, ApiListenOptions {}

/** A request listener for `node:http` plus the resources it holds. */
export interface ApiHandler {
  (req: IncomingMessage, res: ServerResponse): void
  readonly limits: ApiLimits
  /** The configured host names requests may address (the loopback names and IP literals of the bound address are always accepted). */
  readonly allowedHosts: readonly string[]
  /** The token the handler requires (for the page address a server prints). */
  readonly token: string
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
  /** Connections open now: served ones (event streams and idle keep-alive ones included) and ones over the cap being refused. */
  readonly connections: number
  /** Stops accepting connections and closes open ones (and ends event streams). */
  close(): Promise<void>
}

const routes: readonly Route[] = [
  ...pageRoutes,
  listSessionsRoute,
  historyRoute,
  subagentsRoute,
  childHistoryRoute,
  sessionStatsRoute,
  streamRoute,
  searchRoute,
  openApiRoute,
  attachmentRoute,
  childAttachmentRoute,
  compactRoute,
]

/** Builds the API's request listener over the given services (for mounting in an existing server; `apiproxyPlugin` provides one as service `httpApi`). */
export function createApiHandler(options: ApiHandlerOptions): ApiHandler {
  const services = resolveServices(options.ctx, options.services)
  const limits = resolveLimits(options.limits)
  const check = createTokenCheck(options.token)
  const allowedHosts = Object.freeze([...(options.allowedHosts ?? [])])
  const checkHost = createHostCheck(allowedHosts)
  const logger = options.logger ?? options.ctx?.get('logger') ?? consoleLogger
  const streams = new StreamHub(services, options.events ?? options.ctx, limits, logger)
  const answers = new AnswerQueue(limits)

  const respondError = (req: IncomingMessage, res: ServerResponse, error: unknown): void => {
    const response = toErrorResponse(error)
    // Shutdown closed this request's socket and then its query service: nobody gets an answer, and nothing failed.
    if ((res.destroyed || res.socket?.destroyed !== false) && isDshError(error, 'SESSION_QUERY_CLOSED')) return
    if (response.serverFault) logger.error(`dsh: an HTTP ${req.method ?? 'GET'} request failed with ${response.body.code}.`, error)
    else if (response.redacted)
      logger.warn(
        `dsh: an HTTP ${req.method ?? 'GET'} request was refused with ${response.body.code}; the answer carries no details.`,
        error,
      )
    if (res.destroyed || res.writableEnded) return
    const headers: Record<string, string> = {}
    if (response.status === 401) headers['WWW-Authenticate'] = 'Bearer'
    if (response.status === 405) headers.Allow = String(error instanceof ApiError ? (error.details?.allow ?? 'GET') : 'GET')
    if (response.body.code === 'API_BUSY' || response.body.code === 'API_TOO_MANY_STREAMS')
      headers['Retry-After'] = String(HTTP_RETRY_AFTER_SECONDS)
    // The caller may still be sending a body we refused; do not read it, drop the connection after answering.
    if (response.status === 413 || response.status === 414 || response.status === 421) headers.Connection = 'close'
    sendError(res, response, headers)
  }

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // Before anything else: a request addressed to another name (DNS rebinding) reaches nothing.
    checkHost(req)
    const controller = new AbortController()
    // One request may fan out into many concurrent reads (a catalog's cold children), each listening for the abort.
    setMaxListeners(256, controller.signal)
    res.on('close', () => controller.abort())
    const target = parseTarget(req.url ?? '', limits)
    await drainBody(req, limits.maxBodyBytes)
    const match = findRoute(routes, target.segments)
    authenticate(req, target.query, match?.route.auth ?? 'header-or-query', check)
    if (!match)
      throw new ApiError(
        'API_NOT_FOUND',
        `No API route matches ${req.method ?? 'GET'} /${target.segments.map(encodeURIComponent).join('/')}.`,
      )
    const { route, captures } = match
    const method = route.method ?? 'GET'
    // HEAD is GET without the body (`node:http` drops it).
    const allow = method === 'GET' ? 'GET, HEAD' : method
    if (req.method !== method && !(method === 'GET' && req.method === 'HEAD'))
      throw new ApiError('API_METHOD_NOT_ALLOWED', `This route answers ${allow} only, not ${req.method ?? 'an unknown method'}.`, {
        details: { allow },
      })
    const { token: _token, ...query } = target.query
    await route.serve(
      { req, res, signal: controller.signal, services, limits, streams, logger, answers },
      captures,
      route.auth === 'header-or-query' ? query : target.query,
    )
  }

  const handler = ((req: IncomingMessage, res: ServerResponse): void => {
    answers.serve(req, res, () => serve(req, res).catch((error: unknown) => respondError(req, res, error)))
  }) as ApiHandler
  Object.defineProperty(handler, 'limits', { value: limits })
  Object.defineProperty(handler, 'allowedHosts', { value: allowedHosts })
  Object.defineProperty(handler, 'token', { value: options.token })
  Object.defineProperty(handler, 'close', { value: () => streams.close() })
  return handler
}

/**
 * Serves `handler` (e.g. `ctx.require('httpApi')` after `apiproxyPlugin`) on
 * `node:http`: what `dsh serve` runs. Binds 127.0.0.1 by default. Closing the
 * server leaves the handler to its owner (the plugin closes it on dispose).
 */
export async function listenApi(handler: ApiHandler, options: ApiListenOptions = {}): Promise<ApiServer> {
  return listen(handler, options, () => {})
}

/**
 * Starts the HTTP API and the catalog page on `node:http` over the given
 * services: `createApiHandler` plus `listenApi`; closing the server also
 * closes the handler. A host name in `host` is accepted in `Host` headers.
 */
export async function createApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const named = options.host !== undefined && isIP(options.host) === 0 ? [options.host] : []
  const handler = createApiHandler({ ...options, allowedHosts: [...(options.allowedHosts ?? []), ...named] })
  try {
    return await listen(handler, options, () => handler.close())
  } catch (error) {
    handler.close()
    throw error
  }
}

async function listen(handler: ApiHandler, options: ApiListenOptions, release: () => void): Promise<ApiServer> {
  const host = options.host ?? '127.0.0.1'
  const port = options.port ?? 0
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535)
    throw new ApiError('API_INVALID_OPTIONS', `port must be an integer from 0 to 65535, got ${String(port)}.`)
  if (isIP(host) === 0 && host !== 'localhost' && !handler.allowedHosts.includes(host)) {
    throw new ApiError(
      'API_INVALID_OPTIONS',
      `host "${host}" is a name the handler does not accept in Host headers; add it to allowedHosts (apiproxyPlugin or createApiHandler options).`,
    )
  }
  const server = createServer(
    {
      // Room for a request target up to the URL limit, so an over-long one gets our typed 414 instead of a bare 431.
      maxHeaderSize: handler.limits.maxUrlLength + 16 * 1024,
      // A request without Host reaches the handler's host check (a typed 421) instead of a bare 400.
      requireHostHeader: false,
      ...timeoutOptions(handler.limits),
    },
    (req, res) => {
      // A connection over the cap was answered 503 on arrival and is closing; a request it sent meanwhile gets nothing more.
      if (!connections.refused(req.socket)) handler(req, res)
    },
  )
  const connections = guardConnections(server, handler.limits)
  // `Expect: 100-continue`: a client is told to send its body only when the body may be taken; one declared over
  // `maxBodyBytes` gets its 413 instead, before it sends a byte of it (so the answer is not lost to a reset).
  server.on('checkContinue', (req, res) => {
    const declared = Number(req.headers['content-length'] ?? 0)
    if (!(declared > handler.limits.maxBodyBytes)) res.writeContinue()
    server.emit('request', req, res)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  }).catch((error: unknown) => {
    const reason = (error as NodeJS.ErrnoException).code ?? 'an error'
    throw new ApiError('API_LISTEN_FAILED', `Cannot listen on ${host}:${port} (${reason}); choose another port or host.`, { cause: error })
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new ApiError('API_INTERNAL', 'The server did not bind a TCP address.')
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
  let closing: Promise<void> | undefined
  return {
    url,
    pageUrl: `${url}/?token=${encodeURIComponent(handler.token)}`,
    host: address.address,
    port: address.port,
    get connections() {
      return connections.open
    },
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        release()
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
        connections.destroyAll()
      })
      return closing
    },
  }
}
