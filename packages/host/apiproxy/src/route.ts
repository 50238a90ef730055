import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AuthMode } from './auth.js'
import type { ApiLimits } from './limits.js'
import type { QueryParams } from './request.js'
import type { ApiServices } from './services.js'
import type { StreamHub } from './stream-hub.js'

/** What a route handler gets: ids in `params` are already decoded and validated. */
export interface RouteContext {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly params: Readonly<Record<string, string>>
  readonly query: QueryParams
  /** Aborted when the caller goes away, so service reads stop with `CANCELLED`. */
  readonly signal: AbortSignal
  readonly services: ApiServices
  readonly limits: ApiLimits
  readonly streams: StreamHub
}

export interface Route {
  /** Path segments; `:name` segments capture an id. */
  readonly path: readonly string[]
  readonly auth: AuthMode
  /** The query parameters the route accepts (`token` is added for query-token routes). */
  readonly query: readonly string[]
  handle(rc: RouteContext): Promise<void> | void
}

/** Matches decoded segments against `routes`; returns the route and its raw (decoded) captures. */
export function matchRoute(routes: readonly Route[], segments: readonly string[]): { route: Route; captures: Record<string, string> } | undefined {
  for (const route of routes) {
    if (route.path.length !== segments.length) continue
    const captures: Record<string, string> = {}
    let matched = true
    for (let i = 0; i < route.path.length && matched; i++) {
      const pattern = route.path[i]!
      const segment = segments[i]!
      if (pattern.startsWith(':')) captures[pattern.slice(1)] = segment
      else matched = pattern === segment
    }
    if (matched) return { route, captures }
  }
  return undefined
}
