import { PAGE_DEFAULT_LIMIT, PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { SessionLogOffset } from '@dsh/session'
import { SessionQueryError } from './errors.js'
import { checkAborted, invalidFilter } from './failures.js'
import { isIndex, show } from './filter.js'
import { observeRange, type QuerySources } from './sources.js'
import type { EventWindow, HistoryPage } from './types.js'

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

function plainObject<K extends string>(input: unknown, what: string, keys: readonly K[]): { readonly [P in K]?: unknown } {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw invalidFilter(`${what} must be an object`)
  for (const key of Object.keys(input))
    if (!(keys as readonly string[]).includes(key)) throw invalidFilter(`unknown field '${key}' in ${what}`)
  return input as { readonly [P in K]?: unknown }
}

/**
 * `readHistory` of every backend: the page of at most `limit` events
 * strictly before `before` (clipped to the end of the log), ascending, and
 * `nextBefore` towards the start. The request is validated before anything
 * is read (a bad request costs no read); a live session pages its events in
 * memory, a persisted one reads only the page (`observeRange`).
 */
export async function readHistoryOf(
  sources: QuerySources,
  id: string,
  request: unknown,
  signal: AbortSignal | undefined,
): Promise<HistoryPage> {
  checkAborted(signal)
  const parsed = parseHistoryRequest(request)
  const read = await observeRange(
    sources,
    id,
    { limit: parsed.limit, ...(parsed.before === undefined ? {} : { to: SessionLogOffset(parsed.before) }) },
    signal,
  )
  return Object.freeze({
    header: read.header,
    inheritedEventCount: read.inheritedEventCount,
    events: read.events,
    total: read.total,
    ...(read.from > 0 ? { nextBefore: read.from } : {}),
  })
}

/**
 * `readWindow` of every backend: the events from `seq - before` to
 * `seq + after` (clipped to the log), read like a history page; the seq must
 * exist (`SESSION_QUERY_NOT_FOUND`).
 */
export async function readWindowOf(
  sources: QuerySources,
  id: string,
  request: unknown,
  signal: AbortSignal | undefined,
): Promise<EventWindow> {
  checkAborted(signal)
  const parsed = parseWindowRequest(request)
  const read = await observeRange(
    sources,
    id,
    { from: SessionLogOffset(Math.max(0, parsed.seq - parsed.before)), to: SessionLogOffset(parsed.seq + parsed.after + 1) },
    signal,
  )
  if (parsed.seq >= read.total) {
    throw new SessionQueryError(
      'SESSION_QUERY_NOT_FOUND',
      `Session '${read.header.id}' has no event at seq ${parsed.seq}; its log holds ${read.total} events.`,
      { details: { id: read.header.id, seq: parsed.seq } },
    )
  }
  return Object.freeze({ header: read.header, inheritedEventCount: read.inheritedEventCount, events: read.events, total: read.total })
}
