import type { ProjectionStateSchema } from '@dsh/session-projection'

/**
 * Plain checks of the catalog units' checkpoint states. A listing checks the
 * identity and timing rows of every child it serves from the checkpoint cache
 * (400 rows for `dsh agents` on a family of 200), and zod's generic object
 * walk costs a short process more there than the rows' reads. Each check is
 * the zod schema's rules for the states JSON gives (plain objects, own keys):
 * a state it accepts, zod accepts; a state it refuses goes to the zod schema,
 * which accepts what the plain check was stricter about (an object with a
 * prototype other than `Object.prototype`) and words the issues of the rest.
 */
export function plainFirst<T>(accepts: (input: unknown) => boolean, schema: ProjectionStateSchema<T>): ProjectionStateSchema<T> {
  return { safeParse: (input) => (accepts(input) ? { success: true, data: input as T } : schema.safeParse(input)) }
}

type Plain = { readonly [key: string]: unknown }

function isPlain(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype
}

/** Own keys only, each one of `allowed`. */
function onlyKeys(value: Plain, allowed: readonly string[]): boolean {
  for (const key in value) if (!Object.hasOwn(value, key) || !allowed.includes(key)) return false
  return true
}

const isSeq = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
const isNumber = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value)

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

const TIMING_KEYS = ['settledMs', 'activeTurn']
const TURN_FIELDS = ['turn', 'startedAt']

/** `{ settledMs, activeTurn? }`: a finite, non-negative settled time and the open turn's finite number and start. */
export function isTimingState(input: unknown): boolean {
  if (!isPlain(input) || !onlyKeys(input, TIMING_KEYS) || !isNumber(input.settledMs) || (input.settledMs as number) < 0) return false
  if (!Object.hasOwn(input, 'activeTurn')) return true
  const turn = input.activeTurn
  return isPlain(turn) && onlyKeys(turn, TURN_FIELDS) && isNumber(turn.turn) && isNumber(turn.startedAt)
}
