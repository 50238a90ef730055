import {
  type ApiRoute,
  buildTarget,
  errorBody,
  ProtocolError,
  type RouteParams,
  type RouteQuery,
  type RouteResponse,
  routes,
  type SearchPageBody,
  type StreamEventBody,
  type WireSessionRecord,
} from '@dsh/protocol'
import type { z } from 'zod'
import { parseContentType, readBoundedText, shown } from './body.js'
import { ClientError } from './errors.js'
import { readEventStream } from './sse.js'

export interface ClientOptions {
  /** Where the host listens, e.g. `http://127.0.0.1:7420` (what `createApiServer` returns as `url`). */
  readonly baseUrl: string
  readonly token: string
  /** Defaults to the global `fetch`. */
  readonly fetch?: typeof fetch
  /**
   * Longest single event-stream message (or unfinished line) held while
   * reading `stream()`, in characters; default 1 MiB. Past it the stream fails
   * with `CLIENT_STREAM_TOO_LARGE`.
   */
  readonly maxEventSize?: number
  /**
   * Largest answer body read, in bytes; default 64 MiB (four times the
   * largest history page the protocol allows). Past it the call fails with
   * `CLIENT_RESPONSE_TOO_LARGE` and the rest is not read.
   */
  readonly maxResponseBytes?: number
}

export interface RequestOptions {
  readonly signal?: AbortSignal
}

/** The list filter and cursor of `GET /api/sessions` (bounds: `@dsh/protocol`). */
export type ListSessionsFilter = RouteQuery<typeof routes.listSessions>
/** `before` / `limit` of a history page. */
export type HistoryRequest = RouteQuery<typeof routes.history>
/** `q`, `kind`, `limit`, `cursor` of `GET /api/search`. */
export type SearchRequest<K extends 'sessions' | 'events' = 'sessions' | 'events'> = Omit<RouteQuery<typeof routes.search>, 'kind'> & {
  readonly kind?: K
}
export type SubagentsRequest = RouteQuery<typeof routes.subagents>
/** `keep` of a compaction: the newest context messages left verbatim (the host's default, 4, when absent). */
export type CompactRequest = RouteQuery<typeof routes.compact>

export type SessionSearchPage = Extract<SearchPageBody, { kind: 'sessions' }>
export type EventSearchPage = Extract<SearchPageBody, { kind: 'events' }>

/** A typed client of the dsh HTTP API; requests are built and answers validated from the `@dsh/protocol` route table. */
export interface DshClient {
  /** One page of sessions (createdAt, then id order). */
  listSessions(filter?: ListSessionsFilter, options?: RequestOptions): Promise<RouteResponse<typeof routes.listSessions>>
  /** Every matching session, following cursors page by page. */
  sessions(filter?: Omit<ListSessionsFilter, 'cursor'>, options?: RequestOptions): AsyncIterable<WireSessionRecord>
  /** A history page of a session that is not a subagent (subagents: `childHistory`). */
  history(id: string, request?: HistoryRequest, options?: RequestOptions): Promise<RouteResponse<typeof routes.history>>
  /** The subagent catalog of `parentId`: direct children or the whole tree (pre-order). */
  subagents(parentId: string, request?: SubagentsRequest, options?: RequestOptions): Promise<RouteResponse<typeof routes.subagents>>
  /** A subagent's history, through its parent's catalog. */
  childHistory(
    parentId: string,
    childId: string,
    request?: HistoryRequest,
    options?: RequestOptions,
  ): Promise<RouteResponse<typeof routes.childHistory>>
  search(request: SearchRequest<'events'> & { readonly kind: 'events' }, options?: RequestOptions): Promise<EventSearchPage>
  search(request: SearchRequest<'sessions'>, options?: RequestOptions): Promise<SessionSearchPage>
  /**
   * Compacts the session's model-visible context (`POST /api/sessions/:id/compact`):
   * a summary replaces all but the newest `keep` messages in what the model
   * sees next; the log keeps every event. Refusals are typed: e.g.
   * `API_COMPACTION_UNAVAILABLE` (no model on the host), `SESSION_PERSISTENCE_LOCKED`
   * (another process writes the session), `COMPACTION_NOTHING_TO_COMPACT`.
   */
  compact(id: string, request?: CompactRequest, options?: RequestOptions): Promise<RouteResponse<typeof routes.compact>>
  /** The session's SSE stream as validated events; ends when `signal` aborts or the server closes it. */
  stream(id: string, options?: RequestOptions): AsyncIterable<StreamEventBody>
  /** The catalog page's address, token included. */
  readonly pageUrl: string
}

const DEFAULT_MAX_EVENT_SIZE = 1024 * 1024
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024

export function createClient(options: ClientOptions): DshClient {
  let base: URL
  try {
    base = new URL(options.baseUrl)
  } catch (error) {
    throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `baseUrl "${options.baseUrl}" is not an absolute URL.`, { cause: error })
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `baseUrl must be http: or https:, got ${base.protocol}.`)
  }
  const maxEventSize = options.maxEventSize ?? DEFAULT_MAX_EVENT_SIZE
  if (!Number.isSafeInteger(maxEventSize) || maxEventSize < 1) {
    throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `maxEventSize must be a positive integer, got ${String(maxEventSize)}.`)
  }
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes < 1) {
    throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `maxResponseBytes must be a positive integer, got ${String(maxResponseBytes)}.`)
  }
  // fetch trims trailing whitespace off a header value and refuses one holding any of these with a
  // message that quotes it whole; the token must not reach an error text.
  const badToken = /[\0\r\n]|[^\0-\xff]/.exec(options.token.replace(/[\t\n\r ]+$/, ''))
  if (badToken !== null) {
    throw new ClientError(
      'CLIENT_INVALID_ARGUMENT',
      0,
      `The token has a character an HTTP header cannot carry (a line break, NUL or a character past U+00FF) at index ${badToken.index}; check how it was read or copied.`,
    )
  }
  const root = base.href.replace(/\/+$/, '')
  const doFetch = options.fetch ?? globalThis.fetch
  const headers = { Authorization: `Bearer ${options.token}` }

  /** The absolute URL of a route; values past a protocol limit are refused here, before anything is sent. */
  const target = <R extends ApiRoute>(route: R, params: RouteParams<R>, query?: Partial<RouteQuery<R>>): string => {
    try {
      return `${root}${buildTarget(route, params, query)}`
    } catch (error) {
      if (error instanceof ProtocolError) throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, error.message, { cause: error })
      throw error
    }
  }

  const send = async (
    url: string,
    accept: string,
    signal: AbortSignal | undefined,
    method: ApiRoute['method'] = 'GET',
  ): Promise<Response> => {
    if (signal?.aborted) throw cancelled()
    let response: Response
    try {
      // Redirects are never followed: the token must not travel to whatever a redirect names.
      response = await doFetch(url, {
        method,
        headers: { ...headers, Accept: accept },
        redirect: 'manual',
        ...(signal === undefined ? {} : { signal }),
      })
    } catch (error) {
      if (signal?.aborted) throw cancelled()
      throw new ClientError(
        'CLIENT_NETWORK',
        0,
        `The request to ${redact(url)} got no HTTP answer: ${error instanceof Error ? error.message : String(error)}.`,
        {
          cause: error,
        },
      )
    }
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel().catch(() => {})
      throw redirectRefused(url, response)
    }
    return response
  }

  /**
   * The answer's body within `maxResponseBytes`, as UTF-8 (bytes that are not fail a successful
   * answer only); a read that breaks off is `CANCELLED` or `CLIENT_NETWORK`.
   */
  const readText = async (response: Response, url: string, signal: AbortSignal | undefined): Promise<string> => {
    try {
      return await readBoundedText(response, maxResponseBytes, redact(url), response.ok)
    } catch (error) {
      if (error instanceof ClientError) throw error
      if (signal?.aborted) throw cancelled()
      throw new ClientError('CLIENT_NETWORK', response.status, `The answer from ${redact(url)} was cut off.`, { cause: error })
    }
  }

  /** Sends the route's request (its method, no body) and validates the JSON answer against its schema. */
  const callJson = async <R extends ApiRoute>(
    route: R,
    params: RouteParams<R>,
    query: Partial<RouteQuery<R>>,
    signal: AbortSignal | undefined,
  ): Promise<RouteResponse<R>> => {
    const url = target(route, params, query)
    const response = await send(url, 'application/json', signal, route.method)
    const text = await readText(response, url, signal)
    if (!response.ok) throw errorFrom(response.status, text, url)
    const parsed = route.response.safeParse(parseJson(text, response.status, url))
    if (!parsed.success) {
      throw new ClientError(
        'CLIENT_INVALID_RESPONSE',
        response.status,
        `The answer from ${redact(url)} does not match the API schema: ${summarize(parsed.error)}.`,
        {
          cause: parsed.error,
        },
      )
    }
    return parsed.data as RouteResponse<R>
  }

  const client: DshClient = {
    pageUrl: `${root}/?token=${encodeURIComponent(options.token)}`,

    async listSessions(filter = {}, { signal } = {}) {
      return callJson(routes.listSessions, {}, filter, signal)
    },

    async *sessions(filter = {}, { signal } = {}) {
      let cursor: string | undefined
      do {
        const page = await client.listSessions(
          { ...filter, ...(cursor === undefined ? {} : { cursor }) },
          signal === undefined ? {} : { signal },
        )
        yield* page.sessions
        // Listing cursors are keyset positions: a page that carries one holds records and moves past the cursor it was asked with.
        if (page.nextCursor !== undefined && (page.sessions.length === 0 || page.nextCursor === cursor)) {
          throw new ClientError(
            'CLIENT_INVALID_RESPONSE',
            200,
            `The listing from ${redact(root)} answered a page that does not advance (${page.sessions.length === 0 ? 'no sessions' : 'the same cursor'} and a next cursor); stopped instead of asking again.`,
          )
        }
        cursor = page.nextCursor
      } while (cursor !== undefined)
    },

    async history(id, request = {}, { signal } = {}) {
      return callJson(routes.history, { id }, request, signal)
    },

    async subagents(parentId, request = {}, { signal } = {}) {
      return callJson(routes.subagents, { id: parentId }, request, signal)
    },

    async childHistory(parentId, childId, request = {}, { signal } = {}) {
      return callJson(routes.childHistory, { parentId, childId }, request, signal)
    },

    async search(request: SearchRequest, { signal }: RequestOptions = {}) {
      const kind = request.kind ?? 'sessions'
      const page = await callJson(routes.search, {}, { ...request, kind }, signal)
      if (page.kind !== kind)
        throw new ClientError('CLIENT_INVALID_RESPONSE', 200, `Asked to search ${kind} but the answer holds ${page.kind}.`)
      return page
    },

    async compact(id, request = {}, { signal } = {}) {
      return callJson(routes.compact, { id }, request, signal)
    },

    async *stream(id, { signal } = {}) {
      const url = target(routes.stream, { id }, {})
      const response = await send(url, 'text/event-stream', signal)
      if (!response.ok) throw errorFrom(response.status, await readText(response, url, signal), url)
      const contentType = parseContentType(response.headers.get('content-type'))
      if (contentType.mediaType !== 'text/event-stream' || response.body === null) {
        await response.body?.cancel().catch(() => {})
        const got = contentType.mediaType === '' ? 'no content type' : `content type ${shown(contentType.mediaType)}`
        throw new ClientError(
          'CLIENT_INVALID_RESPONSE',
          response.status,
          `The answer from ${redact(url)} is not an event stream (${response.body === null ? 'no body' : got}).`,
        )
      }
      yield* readEventStream(response.body, signal, maxEventSize, contentType.charset)
    },
  } as DshClient
  return client
}

function redirectRefused(url: string, response: Response): ClientError {
  const location = response.headers.get('location')
  let elsewhere = 'an unnamed location'
  if (location !== null) {
    try {
      const to = new URL(location, url)
      elsewhere = to.origin === new URL(url).origin ? `${to.pathname} on the same host` : `another origin (${to.origin})`
    } catch {
      elsewhere = 'an invalid location'
    }
  }
  return new ClientError(
    'CLIENT_REDIRECT_REFUSED',
    response.status,
    `${redact(url)} answered HTTP ${response.status}, a redirect to ${elsewhere}. The dsh host never redirects, so the client follows none (the token stays with the configured host); check baseUrl.`,
  )
}

function errorFrom(status: number, text: string, url: string): ClientError {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  const parsed = errorBody.safeParse(json)
  if (!parsed.success)
    return new ClientError('CLIENT_INVALID_RESPONSE', status, `${redact(url)} failed with HTTP ${status} and no typed error body.`)
  return new ClientError(parsed.data.code, status, parsed.data.message)
}

function parseJson(text: string, status: number, url: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ClientError('CLIENT_INVALID_RESPONSE', status, `The answer from ${redact(url)} is not JSON.`, { cause: error })
  }
}

function summarize(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`)
    .join('; ')
}

/** Error messages name the route, never a token in the query. */
function redact(url: string): string {
  return url.replace(/([?&]token=)[^&]*/, '$1…')
}

function cancelled(): ClientError {
  return new ClientError('CANCELLED', 0, 'The request was cancelled by its caller (AbortSignal aborted).')
}
