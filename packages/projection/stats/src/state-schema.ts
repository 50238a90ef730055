import type { ProjectionStateSchema } from '@dsh/session-projection'
import { isCount, isObject } from './shapes.js'
import { type SessionStatsState, SKIP_REASONS, sessionStatsStateZod } from './stats-types.js'

type Check = (value: unknown) => boolean

const isMs: Check = (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0
const isTime: Check = (value) => value === null || (typeof value === 'number' && Number.isFinite(value))
const isString: Check = (value) => typeof value === 'string'
const isNullableString: Check = (value) => value === null || typeof value === 'string'
const nullable =
  (check: Check): Check =>
  (value) =>
    value === null || check(value)
/** Every index up to the length (a hole is `undefined`, as zod reads it). */
const arrayOf =
  (check: Check): Check =>
  (value) => {
    if (!Array.isArray(value)) return false
    for (let i = 0; i < value.length; i++) if (!check(value[i])) return false
    return true
  }
/** Exactly these own keys (nothing inherited or extra), each passing its check. */
function exactly(shape: { readonly [key: string]: Check }): Check {
  const keys = Object.keys(shape)
  return (value) => {
    if (!isObject(value) || Object.getPrototypeOf(value) !== Object.prototype) return false
    let seen = 0
    for (const key in value) {
      const check = shape[key]
      if (check === undefined || !Object.hasOwn(shape, key) || !Object.hasOwn(value, key) || !check(value[key])) return false
      seen++
    }
    return seen === keys.length
  }
}
const isTokens = exactly({ input: isCount, output: isCount, cacheRead: isCount, cacheWrite: isCount, reasoning: isCount })
const isAttribution = exactly({ provider: isNullableString, model: isNullableString })
const isState = exactly({
  from: isCount,
  turns: isCount,
  steps: isCount,
  turnMs: isMs,
  modelMs: isMs,
  toolMs: isMs,
  firstTokenCount: isCount,
  firstTokenMs: isMs,
  byModel: arrayOf(
    exactly({ provider: isNullableString, model: isNullableString, calls: isCount, callsWithoutUsage: isCount, tokens: isTokens }),
  ),
  tools: arrayOf(exactly({ name: isString, calls: isCount, errors: isCount, ms: isMs })),
  toolErrors: isCount,
  compactions: isCount,
  skipped: exactly(Object.fromEntries(SKIP_REASONS.map((reason) => [reason, isCount]))),
  turn: nullable(exactly({ turn: (value) => typeof value === 'number' && Number.isFinite(value), start: isTime })),
  step: nullable(
    exactly({
      start: isTime,
      named: nullable(isAttribution),
      last: nullable(isAttribution),
      counted: arrayOf(exactly({ provider: isNullableString, model: isNullableString, tokens: isTokens })),
    }),
  ),
  segment: nullable(exactly({ start: isTime, firstToken: (value) => typeof value === 'boolean' })),
  pending: arrayOf(exactly({ callId: isString, name: isString, start: isTime })),
})

/**
 * The `sessionStats` unit's checkpoint schema. A listing checks every cached
 * row against it (200 rows for `dsh agents` on a family of 200), and zod's
 * generic object walk costs a new process more there than the rest of the
 * row's read: a plain check of the same rules decides first, and accepts a
 * state only when the zod schema would (a stricter subset: plain
 * objects, own keys). A state it refuses goes to the zod schema, which
 * accepts what the plain check was stricter about and words the issues of
 * what it rejects.
 */
export const sessionStatsStateSchema: ProjectionStateSchema<SessionStatsState> = {
  safeParse: (input) => (isState(input) ? { success: true, data: input as SessionStatsState } : sessionStatsStateZod.safeParse(input)),
}
