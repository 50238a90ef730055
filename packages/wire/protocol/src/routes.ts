import { z } from 'zod'
import { compactionResult, compactQuery } from './compaction.js'
import { ProtocolError } from './errors.js'
import { openApiDocumentBody } from './openapi-body.js'
import { idParam, preview } from './primitives.js'
import { searchPage, searchQuery } from './search.js'
import { historyPage, historyQuery, listSessionsQuery, sessionListPage } from './session.js'
import { sessionStatsReport, statsQuery } from './stats.js'
import { streamEvent } from './stream.js'
import { subagentList, subagentsQuery } from './subagents.js'

/** How a route accepts the bearer token. */
export type AuthMode =
  /** `Authorization: Bearer <token>` only. */
  | 'header'
  /** The header, or `?token=` for callers that cannot set headers (`EventSource`, a page load). */
  | 'header-or-query'

/**
 * One HTTP route: everything both ends need to agree on. `path` names its
 * parameters as `:name` segments; each is one percent-encoded path segment.
 * Query values arrive as strings and `query` reads them into typed values;
 * `response` is the JSON answer (or, for an event stream, each message).
 */
export interface ApiRoute<P extends z.ZodObject = z.ZodObject, Q extends z.ZodObject = z.ZodObject, R extends z.ZodType = z.ZodType> {
  /** `GET` reads; `POST` acts (no request body: its values travel in the query, like every route's). */
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly params: P
  readonly query: Q
  readonly response: R
  readonly answer: 'json' | 'event-stream'
  readonly auth: AuthMode
}

function route<P extends z.ZodObject, Q extends z.ZodObject, R extends z.ZodType>(spec: ApiRoute<P, Q, R>): ApiRoute<P, Q, R> {
  return Object.freeze(spec)
}

const noParams = z.object({})
const noQuery = z.object({})

/** Every route of the HTTP API. Reads are `GET`, actions `POST`; none takes a body. */
export const routes = Object.freeze({
  /** A page of the live-preferred corpus, `createdAt` then id order. */
  listSessions: route({
    method: 'GET',
    path: '/api/sessions',
    params: noParams,
    query: listSessionsQuery,
    response: sessionListPage,
    answer: 'json',
    auth: 'header',
  }),
  /** A history page of a session that is not a subagent. */
  history: route({
    method: 'GET',
    path: '/api/sessions/:id/history',
    params: z.object({ id: idParam }),
    query: historyQuery,
    response: historyPage,
    answer: 'json',
    auth: 'header',
  }),
  /** The subagent catalog of a session: direct children or the whole subtree. */
  subagents: route({
    method: 'GET',
    path: '/api/sessions/:id/subagents',
    params: z.object({ id: idParam }),
    query: subagentsQuery,
    response: subagentList,
    answer: 'json',
    auth: 'header',
  }),
  /** A subagent's history, only through its own parent's catalog. */
  childHistory: route({
    method: 'GET',
    path: '/api/sessions/:parentId/subagents/:childId/history',
    params: z.object({ parentId: idParam, childId: idParam }),
    query: historyQuery,
    response: historyPage,
    answer: 'json',
    auth: 'header',
  }),
  /** Usage, timing and titles of a session that is not a subagent, or summed over its whole tree (`scope=descendants`); a subagent's own figures are in its parent's catalog. */
  sessionStats: route({
    method: 'GET',
    path: '/api/sessions/:id/stats',
    params: z.object({ id: idParam }),
    query: statsQuery,
    response: sessionStatsReport,
    answer: 'json',
    auth: 'header',
  }),
  /** Full-text search over sessions or events (backends with an index). */
  search: route({
    method: 'GET',
    path: '/api/search',
    params: noParams,
    query: searchQuery,
    response: searchPage,
    answer: 'json',
    auth: 'header',
  }),
  /** Server-Sent Events of the session's projection changes and of catalog changes below it. */
  stream: route({
    method: 'GET',
    path: '/api/sessions/:id/stream',
    params: z.object({ id: idParam }),
    query: noQuery,
    response: streamEvent,
    answer: 'event-stream',
    auth: 'header-or-query',
  }),
  /**
   * Compacts a session's model-visible context on demand: a summary replaces
   * all but the newest `keep` messages in what the model sees next; the log
   * keeps every event. Served when the host has a compaction service.
   */
  compact: route({
    method: 'POST',
    path: '/api/sessions/:id/compact',
    params: z.object({ id: idParam }),
    query: compactQuery,
    response: compactionResult,
    answer: 'json',
    auth: 'header',
  }),
  /** The OpenAPI 3.1 document of this table (built by `@dsh/protocol/openapi`). */
  openapi: route({
    method: 'GET',
    path: '/api/openapi.json',
    params: noParams,
    query: noQuery,
    response: openApiDocumentBody,
    answer: 'json',
    auth: 'header',
  }),
})

export type RouteName = keyof typeof routes
/** Typed path parameters of a route. */
export type RouteParams<R extends ApiRoute> = z.output<R['params']>
/** Typed query of a route (what a caller passes; it travels as strings). */
export type RouteQuery<R extends ApiRoute> = z.output<R['query']>
/** The typed answer of a route (one message, for an event stream). */
export type RouteResponse<R extends ApiRoute> = z.output<R['response']>

/** The result of reading a request against a route: typed values, or a message a caller can act on. */
export type RouteReading<R extends ApiRoute> =
  | { readonly ok: true; readonly params: RouteParams<R>; readonly query: RouteQuery<R> }
  | { readonly ok: false; readonly message: string }

/** Anything with a route path (API routes, and a host's own page routes). */
export interface RoutePath {
  readonly path: string
}

const segmentCache = new WeakMap<RoutePath, readonly string[]>()

/** The route's path split into segments; `:name` segments are parameters. */
export function routeSegments(r: RoutePath): readonly string[] {
  const cached = segmentCache.get(r)
  if (cached) return cached
  const segments = Object.freeze(r.path.slice(1).split('/'))
  segmentCache.set(r, segments)
  return segments
}

/** Matches already-decoded path segments; returns the raw parameter values, or `undefined`. */
export function matchPath(r: RoutePath, segments: readonly string[]): Record<string, string> | undefined {
  const pattern = routeSegments(r)
  if (pattern.length !== segments.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i]!
    const segment = segments[i]!
    if (expected.startsWith(':')) params[expected.slice(1)] = segment
    else if (expected !== segment) return undefined
  }
  return params
}

/**
 * Reads decoded path parameters and query values (strings) against a route:
 * unknown query parameters are refused so a typo is not silently ignored.
 */
export function readRequest<R extends ApiRoute>(
  r: R,
  params: Readonly<Record<string, string>>,
  query: Readonly<Record<string, string>>,
): RouteReading<R> {
  const known = Object.keys(r.query.shape)
  for (const name of Object.keys(query)) {
    if (!known.includes(name)) {
      const accepted = known.length === 0 ? 'none' : known.map((k) => `"${k}"`).join(', ')
      return { ok: false, message: `Unknown query parameter "${preview(name)}"; this route accepts ${accepted}.` }
    }
  }
  const parsedParams = r.params.safeParse(params)
  if (!parsedParams.success) return { ok: false, message: describeIssues(parsedParams.error, 'path parameter') }
  const parsedQuery = r.query.safeParse(query)
  if (!parsedQuery.success) return { ok: false, message: describeIssues(parsedQuery.error, 'query parameter') }
  return { ok: true, params: parsedParams.data as RouteParams<R>, query: parsedQuery.data as RouteQuery<R> }
}

/**
 * The request target (path and query, no origin) for typed values. Values are
 * checked against the route's schemas first, so a request the host would
 * refuse is never sent; throws `PROTOCOL_INVALID_ARGUMENT` saying which value.
 */
export function buildTarget<R extends ApiRoute>(r: R, params: RouteParams<R>, query?: Partial<RouteQuery<R>>): string {
  const values = params as Record<string, unknown>
  const strings: Record<string, string> = {}
  for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) strings[name] = String(value)
  const reading = readRequest(r, Object.fromEntries(Object.entries(values).map(([k, v]) => [k, String(v)])), strings)
  if (!reading.ok) throw new ProtocolError('PROTOCOL_INVALID_ARGUMENT', reading.message)
  const path = routeSegments(r)
    .map((segment) => (segment.startsWith(':') ? encodeURIComponent(String(values[segment.slice(1)])) : segment))
    .join('/')
  const search = new URLSearchParams()
  for (const name of Object.keys(r.query.shape)) if (strings[name] !== undefined) search.set(name, strings[name])
  const text = search.toString()
  return `/${path}${text === '' ? '' : `?${text}`}`
}

/** One sentence naming the first failing value, e.g. `The query parameter "limit" must be an integer from 1 to 1000, got "0".` */
export function describeIssues(error: z.ZodError, where: string): string {
  const issue = error.issues[0]
  if (issue === undefined) return `The ${where}s are invalid.`
  const name = issue.path.length === 0 ? '(value)' : issue.path.map(String).join('.')
  const missing = issue.code === 'invalid_type' && issue.input === undefined
  return `The ${where} "${preview(name)}" ${missing ? 'is required' : issue.message}.`
}
