import { textHead } from '@dsh/context'
import { PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import type { SessionHeader } from '@dsh/session'
import { decodeListCursor, lazyDigest } from './cursor.js'
import { invalidFilter } from './failures.js'
import type { RecordKey } from './order.js'

/** The largest listing page: the protocol's `PAGE_MAX_LIMIT`, one number for host, client and backends. */
export const MAX_PAGE_SIZE = PAGE_MAX_LIMIT

/** A validated listing filter. */
export interface ParsedListFilter {
  readonly parentSession?: string
  /** Any of these parents (distinct, non-empty). */
  readonly parentSessions?: ReadonlySet<string>
  /** These sessions only (distinct, non-empty). */
  readonly ids?: ReadonlySet<string>
  readonly origin?: 'subagent'
  readonly cwd?: string
  readonly createdFrom?: number
  readonly createdTo?: number
  readonly limit?: number
  /** Records strictly after this position (from the cursor). */
  readonly after?: RecordKey
  /** Binds cursors to the filter fields (not to the page size). */
  readonly digest: string
}

const FILTER_KEYS = new Set(['parentSession', 'parentSessions', 'ids', 'origin', 'cwd', 'createdAt', 'limit', 'cursor'])
const RANGE_KEYS = new Set(['from', 'to'])

/**
 * `requestDigest([null, null, null, null, null])`, the digest of a listing
 * without filters, written out: a plain `dsh sessions` then loads no
 * node:crypto (~2.5 ms of a new process). A test checks it against the
 * computed one.
 */
export const UNFILTERED_DIGEST = 'kxhTbHqPl1jzMp2pWAkEt-'

/**
 * Validates an untrusted listing filter (the HTTP host passes query
 * parameters through). Unknown fields and wrong types are
 * `SESSION_QUERY_INVALID_FILTER`; a cursor that is not one this filter issued
 * is `SESSION_QUERY_INVALID_CURSOR`.
 */
export function parseListFilter(input: unknown): ParsedListFilter {
  if (input === undefined) return { digest: UNFILTERED_DIGEST }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw invalidFilter('the filter must be an object')
  const raw = input as Record<string, unknown>
  for (const key of Object.keys(raw)) if (!FILTER_KEYS.has(key)) throw invalidFilter(`unknown filter field '${key}'`)
  const parentSession = optionalId(raw.parentSession, 'parentSession')
  const parentSessions = optionalIds(raw.parentSessions, 'parentSessions')
  if (parentSession !== undefined && parentSessions !== undefined)
    throw invalidFilter('give parentSession or parentSessions, not both (put the one parent in the parentSessions list)')
  const ids = optionalIds(raw.ids, 'ids')
  if (raw.origin !== undefined && raw.origin !== 'subagent')
    throw invalidFilter(`origin must be 'subagent' when present, got ${show(raw.origin)}`)
  const origin = raw.origin
  const cwd = optionalId(raw.cwd, 'cwd')
  let createdFrom: number | undefined
  let createdTo: number | undefined
  if (raw.createdAt !== undefined) {
    const range = raw.createdAt
    if (typeof range !== 'object' || range === null || Array.isArray(range))
      throw invalidFilter('createdAt must be an object { from?, to? }')
    for (const key of Object.keys(range)) if (!RANGE_KEYS.has(key)) throw invalidFilter(`unknown createdAt field '${key}'`)
    createdFrom = optionalEpoch((range as Record<string, unknown>).from, 'createdAt.from')
    createdTo = optionalEpoch((range as Record<string, unknown>).to, 'createdAt.to')
    if (createdFrom !== undefined && createdTo !== undefined && createdFrom > createdTo)
      throw invalidFilter(`createdAt.from (${createdFrom}) is after createdAt.to (${createdTo})`)
  }
  let limit: number | undefined
  if (raw.limit !== undefined) {
    if (!isIndex(raw.limit) || raw.limit < 1 || raw.limit > MAX_PAGE_SIZE)
      throw invalidFilter(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}, got ${show(raw.limit)}`)
    limit = raw.limit
  }
  const parts: unknown[] = [parentSession ?? null, origin ?? null, cwd ?? null, createdFrom ?? null, createdTo ?? null]
  // Appended only when present, so every other filter keeps its digest (and its cursors).
  if (parentSessions !== undefined) parts.push([...parentSessions])
  if (ids !== undefined) parts.push({ ids: [...ids] })
  const digest = parts.every((part) => part === null) ? () => UNFILTERED_DIGEST : lazyDigest(parts)
  const after = raw.cursor === undefined ? undefined : decodeListCursor(raw.cursor, digest())
  return {
    // Computed when a cursor is read or written: a listing that fits one page hashes nothing.
    get digest() {
      return digest()
    },
    ...(parentSession === undefined ? {} : { parentSession }),
    ...(parentSessions === undefined ? {} : { parentSessions }),
    ...(ids === undefined ? {} : { ids }),
    ...(origin === undefined ? {} : { origin }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(createdFrom === undefined ? {} : { createdFrom }),
    ...(createdTo === undefined ? {} : { createdTo }),
    ...(limit === undefined ? {} : { limit }),
    ...(after === undefined ? {} : { after }),
  }
}

/** Whether `header` passes the filter's field conditions (the cursor is applied separately). */
export function matchesFilter(header: SessionHeader, filter: ParsedListFilter): boolean {
  return (
    (filter.parentSession === undefined || header.parentSession === filter.parentSession) &&
    (filter.parentSessions === undefined || (header.parentSession !== undefined && filter.parentSessions.has(header.parentSession))) &&
    (filter.ids === undefined || filter.ids.has(header.id)) &&
    (filter.origin === undefined || header.origin === filter.origin) &&
    (filter.cwd === undefined || header.cwd === filter.cwd) &&
    (filter.createdFrom === undefined || header.createdAt >= filter.createdFrom) &&
    (filter.createdTo === undefined || header.createdAt <= filter.createdTo)
  )
}

function optionalId(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value.length === 0) throw invalidFilter(`${field} must be a non-empty string, got ${show(value)}`)
  return value
}

/** 1..MAX_PAGE_SIZE non-empty strings, repeats dropped (first position kept). */
function optionalIds(value: unknown, field: string): ReadonlySet<string> | undefined {
  if (value === undefined) return undefined
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_PAGE_SIZE)
    throw invalidFilter(`${field} must be an array of 1 to ${MAX_PAGE_SIZE} session ids, got ${show(value)}`)
  const ids = new Set<string>()
  for (const [i, id] of value.entries()) {
    if (typeof id !== 'string' || id.length === 0) throw invalidFilter(`${field}[${i}] must be a non-empty string, got ${show(id)}`)
    ids.add(id)
  }
  return ids
}

function optionalEpoch(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined
  if (!isIndex(value)) throw invalidFilter(`${field} must be a non-negative safe-integer epoch in milliseconds, got ${show(value)}`)
  return value
}

export function isIndex(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)
}

export function show(value: unknown): string {
  if (Object.is(value, -0)) return '-0'
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${textHead(value, 80)}…` : value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value)
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`
}
