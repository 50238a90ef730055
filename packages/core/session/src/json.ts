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
  return copy(value, what, new Set()) as T
}

function copy(value: unknown, path: string, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) fail(path, `${value} is not representable in JSON`)
      if (Object.is(value, -0)) fail(path, '-0 would come back as 0')
      return value
    case 'object': {
      if (value === null) return null
      if (ancestors.has(value)) fail(path, 'it contains a cycle')
      ancestors.add(value)
      try {
        if (Array.isArray(value)) {
          const out: unknown[] = []
          for (let i = 0; i < value.length; i++) {
            if (!(i in value)) fail(`${path}[${i}]`, 'arrays must not have holes')
            out.push(copy(value[i], `${path}[${i}]`, ancestors))
          }
          return Object.freeze(out)
        }
        const proto = Object.getPrototypeOf(value) as unknown
        if (proto !== Object.prototype && proto !== null) {
          const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'unknown'
          fail(path, `a ${name} instance is not plain JSON`)
        }
        if (Object.getOwnPropertySymbols(value).length > 0) fail(path, 'symbol keys are not JSON')
        const out: Record<string, unknown> = {}
        for (const key of Object.keys(value)) {
          // '__proto__' as an own key would become a prototype on a naive copy.
          Object.defineProperty(out, key, {
            value: copy((value as Record<string, unknown>)[key], `${path}.${key}`, ancestors),
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
