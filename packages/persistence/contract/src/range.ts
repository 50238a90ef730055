import { persistenceError } from './errors.js'

/** A ranged read's bounds, checked before anything is read (`checkRange`). */
export interface CheckedRange {
  readonly from: number
  readonly to: number | undefined
  readonly limit: number | undefined
}

/** Where a checked range lies in a log of `total` events: the offsets `[start, end)`, `start <= end <= total`. */
export interface RangeBounds {
  readonly start: number
  readonly end: number
}

/**
 * Checks a `SessionRange` (see `SessionPersistence.inspectRange`): an object
 * whose `from`, `to` and `limit`, where given, are non-negative safe
 * integers. Anything else is `SESSION_PERSISTENCE_INVALID_RANGE`.
 */
export function checkRange(range: unknown): CheckedRange {
  if (typeof range !== 'object' || range === null || Array.isArray(range))
    throw invalidRange(`a range must be an object like { from?, to?, limit? }, got ${describe(range)}`)
  const { from, to, limit } = range as { from?: unknown; to?: unknown; limit?: unknown }
  for (const [name, value] of [
    ['from', from],
    ['to', to],
    ['limit', limit],
  ] as const) {
    if (value !== undefined && !isCount(value)) throw invalidRange(`${name} must be a non-negative integer, got ${describe(value)}`)
  }
  return { from: (from as number | undefined) ?? 0, to: to as number | undefined, limit: limit as number | undefined }
}

/**
 * The offsets a range covers in a log of `total` events: `[from, to)` clipped
 * to the log, then its last `limit`. An empty range starts where it ends.
 */
export function rangeBounds(range: CheckedRange, total: number): RangeBounds {
  const end = Math.min(range.to ?? total, total)
  const start = Math.min(end, Math.max(range.from, range.limit === undefined ? 0 : end - range.limit))
  return { start, end }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'object' && value !== null) return Array.isArray(value) ? 'an array' : 'an object'
  return String(value)
}

function invalidRange(why: string): Error {
  return persistenceError('SESSION_PERSISTENCE_INVALID_RANGE', `Invalid session range: ${why}.`, {})
}
