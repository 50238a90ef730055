import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from '@dsh/context'
import { type ApiRoute, matchPath, type RouteParams, type RouteQuery, type RouteResponse, readRequest } from '@dsh/protocol'
import type { AnswerQueue } from './answers.js'
import type { AuthMode } from './auth.js'
import { ApiError } from './errors.js'
import { sendJson } from './http.js'
import type { ApiLimits } from './limits.js'
import type { ApiServices } from './services.js'
import type { StreamHub } from './stream-hub.js'

/** What a handler gets: `params` and `query` are already read against the route's protocol schemas. */
export interface RouteContext<P = Readonly<Record<string, never>>, Q = Readonly<Record<string, never>>> {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly params: P
  readonly query: Q
  /** Aborted when the caller goes away, so service reads stop with `CANCELLED`. */
  readonly signal: AbortSignal
  readonly services: ApiServices
  readonly limits: ApiLimits
  readonly streams: StreamHub
  /** Where details that stay off the wire go. */
  readonly logger: Logger
  /** Bounds the bytes of answers written and not yet read (`reserve` before writing a body). */
  readonly answers: AnswerQueue
}

type BaseContext = Omit<RouteContext, 'params' | 'query'>

/** A route the server dispatches: an API route of the protocol table, or a page asset. */
export interface Route {
  /** The one method the route answers, `GET` when absent (any other on its path is 405). */
  readonly method?: 'GET' | 'POST'
  readonly path: string
  readonly auth: AuthMode
  /** Reads decoded captures and query values (without `token`) and runs the handler; throws `API_BAD_REQUEST` on a value the route refuses. */
  serve(base: BaseContext, captures: Readonly<Record<string, string>>, query: Readonly<Record<string, string>>): Promise<void>
}

/** Matches decoded segments against `routes`. */
export function findRoute(
  routes: readonly Route[],
  segments: readonly string[],
): { route: Route; captures: Record<string, string> } | undefined {
  for (const route of routes) {
    const captures = matchPath(route, segments)
    if (captures !== undefined) return { route, captures }
  }
  return undefined
}

function read<R extends ApiRoute>(route: R, captures: Readonly<Record<string, string>>, query: Readonly<Record<string, string>>) {
  const reading = readRequest(route, captures, query)
  if (!reading.ok) throw new ApiError('API_BAD_REQUEST', reading.message)
  return reading
}

/** An API route answering JSON: the handler returns the typed body of `route.response`. */
export function jsonRoute<R extends ApiRoute>(
  route: R,
  handle: (rc: RouteContext<RouteParams<R>, RouteQuery<R>>) => Promise<RouteResponse<R>>,
): Route {
  return {
    method: route.method,
    path: route.path,
    auth: route.auth,
    async serve(base, captures, query) {
      const { params, query: typed } = read(route, captures, query)
      sendJson(base.res, 200, await handle({ ...base, params, query: typed }), {}, base.answers)
    },
  }
}

/** An API route that writes its own answer (the event stream). */
export function streamingRoute<R extends ApiRoute>(route: R, handle: (rc: RouteContext<RouteParams<R>, RouteQuery<R>>) => void): Route {
  return {
    method: route.method,
    path: route.path,
    auth: route.auth,
    async serve(base, captures, query) {
      const { params, query: typed } = read(route, captures, query)
      handle({ ...base, params, query: typed })
    },
  }
}
