import type { ProjectionStateSchema } from '@dsh/session-projection'

/**
 * Plain checks of the catalog units' checkpoint states. A listing checks the
 * identity and timing rows of every child it serves from the checkpoint cache
 * (400 rows for `dsh agents` on a family of 200); plain checks cost a short
 * process less than zod's generic object walk, and a listing loads no zod at
 * all. Each check is the unit's state rules for the values a row holds (JSON:
 * plain objects with own keys); the tests hold them to the same rules written
 * in zod.
 */
export function plainSchema<T>(key: string, accepts: (input: unknown) => boolean): ProjectionStateSchema<T> {
  return {
    safeParse: (input) =>
      accepts(input)
        ? { success: true, data: input as T }
        : {
            success: false,
            error: { issues: [{ path: [], message: `not a '${key}' state (a key, type or value its unit never writes)` }] },
          },
  }
}

export type Plain = { readonly [key: string]: unknown }

export function isPlain(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype
}

/** Own keys only, each one of `allowed`. */
export function onlyKeys(value: Plain, allowed: readonly string[]): boolean {
  for (const key in value) if (!Object.hasOwn(value, key) || !allowed.includes(key)) return false
  return true
}

export const isSeq = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
export const isNumber = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value)

const IDENTITY_KEYS = ['identity']
const IDENTITY_FIELDS = ['mode', 'label', 'seq']

/** `{}` or `{ identity }`: a one-shot identity with an optional label, a continuable one with a label, each with its seq. */
export function isIdentityState(input: unknown): boolean {
  if (!isPlain(input) || !onlyKeys(input, IDENTITY_KEYS)) return false
  if (!Object.hasOwn(input, 'identity')) return true
  const identity = input.identity
  if (!isPlain(identity) || !onlyKeys(identity, IDENTITY_FIELDS) || !isSeq(identity.seq)) return false
  if (identity.mode === 'continuable') return typeof identity.label === 'string'
  return identity.mode === 'one-shot' && (!Object.hasOwn(identity, 'label') || typeof identity.label === 'string')
}

const TIMING_KEYS = ['settledMs', 'activeTurn', 'startedAt', 'endedAt', 'closed']
const TURN_FIELDS = ['turn', 'startedAt']

/**
 * `{ settledMs, activeTurn?, startedAt?, endedAt?, closed? }`: a finite,
 * non-negative settled time, the open turn's finite number and start, the
 * finite ends of the session's span, and `closed: true` once it is closed.
 */
export function isTimingState(input: unknown): boolean {
  if (!isPlain(input) || !onlyKeys(input, TIMING_KEYS) || !isNumber(input.settledMs) || (input.settledMs as number) < 0) return false
  for (const key of ['startedAt', 'endedAt'] as const) if (Object.hasOwn(input, key) && !isNumber(input[key])) return false
  if (Object.hasOwn(input, 'closed') && input.closed !== true) return false
  if (!Object.hasOwn(input, 'activeTurn')) return true
  const turn = input.activeTurn
  return isPlain(turn) && onlyKeys(turn, TURN_FIELDS) && isNumber(turn.turn) && isNumber(turn.startedAt)
}
