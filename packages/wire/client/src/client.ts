import {
  errorBody,
  historyPage,
  searchPage,
  sessionListPage,
  subagentList,
  type HistoryPageBody,
  type SearchPageBody,
  type SessionListPageBody,
  type StreamEventBody,
  type SubagentListBody,
  type SubagentScope,
  type WireSessionRecord,
} from '@dsh/apiproxy/schemas'
import type { z } from 'zod'
import { ClientError } from './errors.js'
import { readEventStream } from './sse.js'

export interface ClientOptions {
  /** Where the host listens, e.g. `http://127.0.0.1:7420` (what `createApiServer` returns as `url`). */
  readonly baseUrl: string
  readonly token: string
  /** Defaults to the global `fetch`. */
  readonly fetch?: typeof fetch
}

export interface RequestOptions {
  readonly signal?: AbortSignal
}

export interface ListSessionsFilter {
  readonly parentSession?: string
  readonly origin?: 'subagent'
  readonly cwd?: string
  /** Inclusive bounds on `header.createdAt` (epoch ms). */
  readonly createdFrom?: number
  readonly createdTo?: number
  readonly limit?: number
  readonly cursor?: string
}

export interface HistoryRequest {
  /** Events strictly before this seq (default: the end of the log). */
  readonly before?: number
  readonly limit?: number
}

export interface SearchRequest<K extends 'sessions' | 'events' = 'sessions' | 'events'> {
  readonly q: string
  readonly kind?: K
  readonly limit?: number
  readonly cursor?: string
}

export type SessionSearchPage = Extract<SearchPageBody, { kind: 'sessions' }>
export type EventSearchPage = Extract<SearchPageBody, { kind: 'events' }>

/** A typed client of the dsh HTTP API; every response is validated against the host's schemas. */
export interface DshClient {
  /** One page of sessions (createdAt, then id order). */
  listSessions(filter?: ListSessionsFilter, options?: RequestOptions): Promise<SessionListPageBody>
  /** Every matching session, following cursors page by page. */
  sessions(filter?: Omit<ListSessionsFilter, 'cursor'>, options?: RequestOptions): AsyncIterable<WireSessionRecord>
  /** A history page of a session that is not a subagent (subagents: `childHistory`). */
  history(id: string, request?: HistoryRequest, options?: RequestOptions): Promise<HistoryPageBody>
  /** The subagent catalog of `parentId`: direct children or the whole tree (pre-order). */
  subagents(parentId: string, request?: { readonly scope?: SubagentScope }, options?: RequestOptions): Promise<SubagentListBody>
  /** A subagent's history, through its parent's catalog. */
  childHistory(parentId: string, childId: string, request?: HistoryRequest, options?: RequestOptions): Promise<HistoryPageBody>
  search(request: SearchRequest<'events'> & { readonly kind: 'events' }, options?: RequestOptions): Promise<EventSearchPage>
  search(request: SearchRequest<'sessions'>, options?: RequestOptions): Promise<SessionSearchPage>
  /** The session's SSE stream as validated events; ends when `signal` aborts or the server closes it. */
  stream(id: string, options?: RequestOptions): AsyncIterable<StreamEventBody>
  /** The catalog page's address, token included. */
  readonly pageUrl: string
}

type Query = Readonly<Record<string, string | number | undefined>>

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
  const root = base.href.replace(/\/+$/, '')
  const doFetch = options.fetch ?? globalThis.fetch
  const headers = { Authorization: `Bearer ${options.token}` }

  const url = (segments: readonly string[], query: Query = {}): string => {
    const params = new URLSearchParams()
    for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, String(value))
    const search = params.toString()
    return `${root}/${segments.map(encodeURIComponent).join('/')}${search === '' ? '' : `?${search}`}`
  }

  const send = async (target: string, accept: string, signal: AbortSignal | undefined): Promise<Response> => {
    if (signal?.aborted) throw cancelled()
    try {
      return await doFetch(target, { headers: { ...headers, Accept: accept }, ...(signal === undefined ? {} : { signal }) })
    } catch (error) {
      if (signal?.aborted) throw cancelled()
      throw new ClientError('CLIENT_NETWORK', 0, `The request to ${redact(target)} got no HTTP answer: ${error instanceof Error ? error.message : String(error)}.`, { cause: error })
    }
  }

  const getJson = async <S extends z.ZodType>(segments: readonly string[], query: Query, schema: S, signal: AbortSignal | undefined): Promise<z.infer<S>> => {
    const target = url(segments, query)
    const response = await send(target, 'application/json', signal)
    let text: string
    try {
      text = await response.text()
    } catch (error) {
      if (signal?.aborted) throw cancelled()
      throw new ClientError('CLIENT_NETWORK', response.status, `The answer from ${redact(target)} was cut off.`, { cause: error })
    }
    if (!response.ok) throw await errorFrom(response.status, text, target)
    const parsed = schema.safeParse(parseJson(text, response.status, target))
    if (!parsed.success) {
      throw new ClientError('CLIENT_INVALID_RESPONSE', response.status, `The answer from ${redact(target)} does not match the API schema: ${summarize(parsed.error)}.`, { cause: parsed.error })
    }
    return parsed.data
  }

  const client: DshClient = {
    pageUrl: `${root}/?token=${encodeURIComponent(options.token)}`,

    async listSessions(filter = {}, { signal } = {}) {
      return getJson(['api', 'sessions'], { ...filter }, sessionListPage, signal)
    },

    async *sessions(filter = {}, { signal } = {}) {
      let cursor: string | undefined
      do {
        const page = await client.listSessions({ ...filter, ...(cursor === undefined ? {} : { cursor }) }, signal === undefined ? {} : { signal })
        yield* page.sessions
        cursor = page.nextCursor
      } while (cursor !== undefined)
    },

    async history(id, request = {}, { signal } = {}) {
      return getJson(['api', 'sessions', checkId(id, 'id'), 'history'], { ...request }, historyPage, signal)
    },

    async subagents(parentId, request = {}, { signal } = {}) {
      return getJson(['api', 'sessions', checkId(parentId, 'parentId'), 'subagents'], { scope: request.scope }, subagentList, signal)
    },

    async childHistory(parentId, childId, request = {}, { signal } = {}) {
      return getJson(['api', 'sessions', checkId(parentId, 'parentId'), 'subagents', checkId(childId, 'childId'), 'history'], { ...request }, historyPage, signal)
    },

    async search(request: SearchRequest, { signal }: RequestOptions = {}) {
      const page = await getJson(['api', 'search'], { q: request.q, kind: request.kind ?? 'sessions', limit: request.limit, cursor: request.cursor }, searchPage, signal)
      if (page.kind !== (request.kind ?? 'sessions')) {
        throw new ClientError('CLIENT_INVALID_RESPONSE', 200, `Asked to search ${request.kind ?? 'sessions'} but the answer holds ${page.kind}.`)
      }
      return page
    },

    async *stream(id, { signal } = {}) {
      const target = url(['api', 'sessions', checkId(id, 'id'), 'stream'])
      const response = await send(target, 'text/event-stream', signal)
      if (!response.ok) throw await errorFrom(response.status, await response.text().catch(() => ''), target)
      if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream') || response.body === null) {
        throw new ClientError('CLIENT_INVALID_RESPONSE', response.status, `The answer from ${redact(target)} is not an event stream.`)
      }
      yield* readEventStream(response.body, signal)
    },
  } as DshClient
  return client
}

/**
 * Ids travel as one percent-encoded path segment. `.` and `..` are refused
 * here because `fetch` would resolve them as dot segments and reach another
 * route (the host refuses them as well).
 */
function checkId(id: string, what: string): string {
  if (typeof id !== 'string' || id.length === 0) throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `${what} must be a non-empty string.`)
  if (id === '.' || id === '..') throw new ClientError('CLIENT_INVALID_ARGUMENT', 0, `${what} "${id}" is a dot segment and cannot be addressed by path.`)
  return id
}

async function errorFrom(status: number, text: string, target: string): Promise<ClientError> {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  const parsed = errorBody.safeParse(json)
  if (!parsed.success) {
    return new ClientError('CLIENT_INVALID_RESPONSE', status, `${redact(target)} failed with HTTP ${status} and no typed error body.`)
  }
  return new ClientError(parsed.data.code, status, parsed.data.message)
}

function parseJson(text: string, status: number, target: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ClientError('CLIENT_INVALID_RESPONSE', status, `The answer from ${redact(target)} is not JSON.`, { cause: error })
  }
}

function summarize(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`)
    .join('; ')
}

/** Error messages name the route, never a token in the query. */
function redact(target: string): string {
  return target.replace(/([?&]token=)[^&]*/, '$1…')
}

function cancelled(): ClientError {
  return new ClientError('CANCELLED', 0, 'The request was cancelled by its caller (AbortSignal aborted).')
}
