import { SessionError } from './errors.js'

export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue }

/**
 * Validates that `value` survives `JSON.stringify` → `JSON.parse` unchanged
 * and returns a deep-frozen copy of it. Rejected: NaN/Infinity, -0,
 * undefined (also as a property value), functions, symbols, bigints, cycles,
 * and any object that is not a plain object or array (Date, Map, class
 * instances). Throws `SESSION_INVALID_EVENT` naming the offending path.
 */
export function freezeLosslessJson<T>(value: T, what = 'data'): T {
  return copy(value, what, { ancestors: new Set(), bytes: 0 }) as T
}

/** A frozen copy and an upper bound of the UTF-8 bytes of its JSON. */
export interface SizedJson<T> {
  readonly value: T
  readonly maxBytes: number
}

/**
 * Internal to this package: `freezeLosslessJson`, plus an upper bound of the
 * UTF-8 bytes `JSON.stringify` makes of the copy, gathered on the walk the
 * check makes anyway (no serialization). Never below the exact size.
 */
export function freezeLosslessJsonSized<T>(value: T, what: string): SizedJson<T> {
  const walk: Walk = { ancestors: new Set(), bytes: 0 }
  const frozen = copy(value, what, walk) as T
  return { value: frozen, maxBytes: walk.bytes }
}

/**
 * Most UTF-8 bytes of one UTF-16 code unit in a JSON string: a control
 * character or a lone surrogate is escaped as `\uXXXX` (6); anything else is
 * at most 3 bytes (a surrogate pair is 4 bytes for 2 units).
 */
export const JSON_MAX_BYTES_PER_UNIT = 6

/**
 * Most bytes of a finite number's JSON: `-0.0000012345678901234567` (25), a
 * sign, `0.`, five zeros and 17 significant digits. The exponent form is at
 * most 24 (`-1.7976931348623157e+308`), an integer at most 22.
 */
export const JSON_MAX_NUMBER_BYTES = 25

/** Most bytes of a JSON literal: `false`. */
const LITERAL_MAX_BYTES = 5

interface Walk {
  readonly ancestors: Set<object>
  /** Upper bound of the JSON bytes of everything visited so far. */
  bytes: number
}

function copy(value: unknown, path: string, walk: Walk): unknown {
  switch (typeof value) {
    case 'string':
      walk.bytes += value.length * JSON_MAX_BYTES_PER_UNIT + 2
      return value
    case 'boolean':
      walk.bytes += LITERAL_MAX_BYTES
      return value
    case 'number':
      if (!Number.isFinite(value)) fail(path, `${value} is not representable in JSON`)
      if (Object.is(value, -0)) fail(path, '-0 would come back as 0')
      walk.bytes += JSON_MAX_NUMBER_BYTES
      return value
    case 'object': {
      if (value === null) {
        walk.bytes += LITERAL_MAX_BYTES
        return null
      }
      const { ancestors } = walk
      if (ancestors.has(value)) fail(path, 'it contains a cycle')
      ancestors.add(value)
      try {
        if (Array.isArray(value)) {
          // Brackets, and a comma after each element (one more than needed).
          walk.bytes += 2 + value.length
          const out: unknown[] = []
          for (let i = 0; i < value.length; i++) {
            if (!(i in value)) fail(`${path}[${i}]`, 'arrays must not have holes')
            out.push(copy(value[i], `${path}[${i}]`, walk))
          }
          return Object.freeze(out)
        }
        const proto = Object.getPrototypeOf(value) as unknown
        if (proto !== Object.prototype && proto !== null) {
          const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'unknown'
          fail(path, `a ${name} instance is not plain JSON`)
        }
        if (Object.getOwnPropertySymbols(value).length > 0) fail(path, 'symbol keys are not JSON')
        walk.bytes += 2
        const out: Record<string, unknown> = {}
        for (const key of Object.keys(value)) {
          // The quoted key, its colon and a comma after the member.
          walk.bytes += key.length * JSON_MAX_BYTES_PER_UNIT + 4
          // '__proto__' as an own key would become a prototype on a naive copy.
          Object.defineProperty(out, key, {
            value: copy((value as Record<string, unknown>)[key], `${path}.${key}`, walk),
            enumerable: true,
            writable: false,
            configurable: false,
          })
        }
        return Object.freeze(out)
      } finally {
        ancestors.delete(value)
      }
    }
    case 'undefined':
      return fail(path, 'undefined is not JSON')
    default:
      return fail(path, `a ${typeof value} is not JSON`)
  }
}

function fail(path: string, why: string): never {
  throw new SessionError('SESSION_INVALID_EVENT', `Event ${path} is not lossless JSON: ${why}.`, { details: { path } })
}
