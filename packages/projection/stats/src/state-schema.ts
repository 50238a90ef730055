import type { ProjectionStateSchema } from '@dsh/session-projection'
import {
  arrayOf,
  type Check,
  exactly,
  isFiniteNumber,
  isNonNegative,
  isNullableString,
  isString,
  nullable,
  plainStateSchema,
} from './plain-check.js'
import { isCount } from './shapes.js'
import { type SessionStatsState, SKIP_REASONS } from './stats-types.js'

const isTime: Check = nullable(isFiniteNumber)
const isTokens = exactly({ input: isCount, output: isCount, cacheRead: isCount, cacheWrite: isCount, reasoning: isCount })
const isAttribution = exactly({ provider: isNullableString, model: isNullableString })
const isState = exactly({
  from: isCount,
  turns: isCount,
  steps: isCount,
  turnMs: isNonNegative,
  modelMs: isNonNegative,
  toolMs: isNonNegative,
  firstTokenCount: isCount,
  firstTokenMs: isNonNegative,
  byModel: arrayOf(
    exactly({ provider: isNullableString, model: isNullableString, calls: isCount, callsWithoutUsage: isCount, tokens: isTokens }),
  ),
  tools: arrayOf(exactly({ name: isString, calls: isCount, errors: isCount, ms: isNonNegative })),
  toolErrors: isCount,
  compactions: isCount,
  skipped: exactly(Object.fromEntries(SKIP_REASONS.map((reason) => [reason, isCount]))),
  turn: nullable(exactly({ turn: isFiniteNumber, start: isTime })),
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
 * The `sessionStats` unit's checkpoint schema, a plain check (`plain-check.ts`):
 * counts are safe non-negative integers, durations finite and not negative,
 * times finite or null, every object exactly its keys. A listing checks every
 * cached row against it (200 rows for `dsh agents` on a family of 200) and
 * loads no schema library for it.
 */
export const sessionStatsStateSchema: ProjectionStateSchema<SessionStatsState> = plainStateSchema('sessionStats', isState)
