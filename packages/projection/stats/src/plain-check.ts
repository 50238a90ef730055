import type { ProjectionStateSchema } from '@dsh/session-projection'
import { SessionStatsError } from './errors.js'
import { isObject } from './shapes.js'

/**
 * Plain structural checks: the rules of a strict schema as functions that
 * return a verdict and allocate nothing on the way to `true`. A listing checks
 * a cached state per row, and a short command that loads no schema library
 * pays for these alone.
 *
 * A check that fails records where (`failedAt`): each container a failure
 * passes through adds its key, so the path costs nothing while values pass.
 */
export type Check = (value: unknown) => boolean

const trail: Array<string | number> = []

/** A failed check's path (`byModel.0.tokens.input`, `(root)` at the top), read once: the trail is cleared. */
export function failedAt(): string {
  const path = trail.reverse().join('.')
  trail.length = 0
  return path === '' ? '(root)' : path
}

/**
 * A unit's checkpoint schema of a plain check: a state it accepts is the
 * data; one it refuses is `SESSION_STATS_INVALID_STATE`, naming the unit and
 * the first path that failed (a listing shows the state as unknown, the
 * registry treats it as a poisoned row).
 */
export function plainStateSchema<T>(key: string, check: Check): ProjectionStateSchema<T> {
  return {
    safeParse(input) {
      trail.length = 0
      if (check(input)) return { success: true, data: input as T }
      const path = failedAt()
      return {
        success: false,
        error: new SessionStatsError(
          'SESSION_STATS_INVALID_STATE',
          `The '${key}' checkpoint state does not match the unit's schema at ${path}; the session is folded from its log instead.`,
          { details: { key, path } },
        ),
      }
    },
  }
}

function fail(key: string | number): false {
  trail.push(key)
  return false
}

/** `null`, or what `check` accepts. */
export const nullable =
  (check: Check): Check =>
  (value) =>
    value === null || check(value)

/** An array whose every index (a hole reads as `undefined`) passes `check`. */
export const arrayOf =
  (check: Check): Check =>
  (value) => {
    if (!Array.isArray(value)) return false
    for (let i = 0; i < value.length; i++) if (!check(value[i])) return fail(i)
    return true
  }

/**
 * A plain object (its prototype `Object.prototype`) with exactly these own
 * keys, each passing its check: nothing inherited, nothing extra, none
 * missing but the `optional` ones (absent, never `undefined`).
 */
export function exactly(shape: { readonly [key: string]: Check }, optional: readonly string[] = []): Check {
  const required = Object.keys(shape).length - optional.length
  return (value) => {
    if (!isObject(value) || Object.getPrototypeOf(value) !== Object.prototype) return false
    let seen = 0
    for (const key in value) {
      if (!Object.hasOwn(value, key) || !Object.hasOwn(shape, key)) return fail(key)
      if (!(shape[key] as Check)(value[key])) return fail(key)
      if (!optional.includes(key)) seen++
    }
    if (seen === required) return true
    for (const key of Object.keys(shape)) if (!optional.includes(key) && !Object.hasOwn(value, key)) return fail(key)
    return false
  }
}

/** A plain object whose own keys all pass `key` and whose values all pass `check`. */
export const recordOf =
  (key: Check, check: Check): Check =>
  (value) => {
    if (!isObject(value) || Object.getPrototypeOf(value) !== Object.prototype) return false
    for (const name in value) if (!Object.hasOwn(value, name) || !key(name) || !check(value[name])) return fail(name)
    return true
  }

export const isString: Check = (value) => typeof value === 'string'
export const isNonEmptyString: Check = (value) => typeof value === 'string' && value.length > 0
export const isNullableString: Check = nullable(isString)
/** A finite number. */
export const isFiniteNumber: Check = (value) => typeof value === 'number' && Number.isFinite(value)
/** A finite number, not negative. */
export const isNonNegative: Check = (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0
