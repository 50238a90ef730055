import { PAGE_DEFAULT_LIMIT, PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { SessionQueryError } from './errors.js'
import { checkAborted, invalidFilter } from './failures.js'
import { isIndex, show } from './filter.js'
import type { EventWindow, HistoryPage, SessionQueryObservation } from './types.js'

/** History pages are pages of the protocol: `PAGE_MAX_LIMIT` and `PAGE_DEFAULT_LIMIT`, one definition for host, client and backends. */
export const MAX_HISTORY_PAGE = PAGE_MAX_LIMIT
const DEFAULT_HISTORY_PAGE = PAGE_DEFAULT_LIMIT
const DEFAULT_WINDOW_SIDE = 10

export interface ParsedHistoryRequest {
  readonly before?: number
  readonly limit: number
}

export interface ParsedWindowRequest {
  readonly seq: number
  readonly before: number
  readonly after: number
}

/** Validates a history page request before any read happens. */
export function parseHistoryRequest(input: unknown): ParsedHistoryRequest {
  if (input === undefined) return { limit: DEFAULT_HISTORY_PAGE }
  const raw = plainObject(input, 'a history request', ['before', 'limit'])
  if (raw.before !== undefined && !isIndex(raw.before))
    throw invalidFilter(`before must be a non-negative integer seq, got ${show(raw.before)}`)
  if (raw.limit !== undefined && (!isIndex(raw.limit) || raw.limit < 1 || raw.limit > MAX_HISTORY_PAGE)) {
    throw invalidFilter(`limit must be an integer from 1 to ${MAX_HISTORY_PAGE}, got ${show(raw.limit)}`)
  }
  return { limit: raw.limit ?? DEFAULT_HISTORY_PAGE, ...(raw.before === undefined ? {} : { before: raw.before }) }
}

/** Validates an event window request before any read happens. */
export function parseWindowRequest(input: unknown): ParsedWindowRequest {
  const raw = plainObject(input, 'an event window request', ['seq', 'before', 'after'])
  if (!isIndex(raw.seq)) throw invalidFilter(`seq must be a non-negative integer, got ${show(raw.seq)}`)
  return { seq: raw.seq, before: windowSide(raw.before, 'before'), after: windowSide(raw.after, 'after') }
}

function windowSide(value: unknown, side: string): number {
  if (value === undefined) return DEFAULT_WINDOW_SIDE
  if (!isIndex(value) || value > MAX_HISTORY_PAGE)
    throw invalidFilter(`${side} must be an integer from 0 to ${MAX_HISTORY_PAGE}, got ${show(value)}`)
  return value
}

/**
 * The page of at most `limit` events strictly before `before` (clamped to the
 * end of the log), ascending; `nextBefore` continues towards the start.
 */
export function historyPage(observation: SessionQueryObservation, request: ParsedHistoryRequest): HistoryPage {
  const total = observation.events.length
  const end = Math.min(request.before ?? total, total)
  const start = Math.max(0, end - request.limit)
  return Object.freeze({
    header: observation.header,
    inheritedEventCount: observation.inheritedEventCount,
    events: Object.freeze(observation.events.slice(start, end)),
    total,
    ...(start > 0 ? { nextBefore: start } : {}),
  })
}

/** The events from `seq - before` to `seq + after` (clipped to the log); the seq must exist. */
export function eventWindow(observation: SessionQueryObservation, request: ParsedWindowRequest): EventWindow {
  const total = observation.events.length
  if (request.seq >= total) {
    throw new SessionQueryError(
      'SESSION_QUERY_NOT_FOUND',
      `Session '${observation.header.id}' has no event at seq ${request.seq}; its log holds ${total} events.`,
      {
        details: { id: observation.header.id, seq: request.seq },
      },
    )
  }
  return Object.freeze({
    header: observation.header,
    inheritedEventCount: observation.inheritedEventCount,
    events: Object.freeze(
      observation.events.slice(Math.max(0, request.seq - request.before), Math.min(total, request.seq + request.after + 1)),
    ),
    total,
  })
}

function plainObject<K extends string>(input: unknown, what: string, keys: readonly K[]): { readonly [P in K]?: unknown } {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw invalidFilter(`${what} must be an object`)
  for (const key of Object.keys(input))
    if (!(keys as readonly string[]).includes(key)) throw invalidFilter(`unknown field '${key}' in ${what}`)
  return input as { readonly [P in K]?: unknown }
}

/** How a backend observes one session (its `observeSession`). */
export type ObserveSession = (id: string, signal: AbortSignal | undefined) => Promise<SessionQueryObservation>

/**
 * `readHistory` of every backend: the request is validated before anything
 * is read (a bad request costs no observation), then one observation is paged.
 */
export async function readHistoryOf(
  observeSession: ObserveSession,
  id: string,
  request: unknown,
  signal: AbortSignal | undefined,
): Promise<HistoryPage> {
  checkAborted(signal)
  const parsed = parseHistoryRequest(request)
  return historyPage(await observeSession(id, signal), parsed)
}

/** `readWindow` of every backend: validated first, then one observation around the requested seq. */
export async function readWindowOf(
  observeSession: ObserveSession,
  id: string,
  request: unknown,
  signal: AbortSignal | undefined,
): Promise<EventWindow> {
  checkAborted(signal)
  const parsed = parseWindowRequest(request)
  return eventWindow(await observeSession(id, signal), parsed)
}
