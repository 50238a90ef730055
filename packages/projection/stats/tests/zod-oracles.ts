import type { ProjectionStateSchema } from '@dsh/session-projection'
import { z } from 'zod/mini'
import type { SessionStatsState, SessionTitleState } from '../src/index.js'
import { SKIP_REASONS, type SkipReason } from '../src/stats-types.js'

// The units' state rules written in zod: the oracle the plain checks (src/state-schema.ts,
// src/title.ts) are compared with on mutated states.
const count = z.int().check(z.nonnegative())
const finite = z.refine(Number.isFinite, 'must be finite')
const ms = z.number().check(z.nonnegative(), finite)
const time = z.nullable(z.number().check(finite))
const tokens = z.strictObject({ input: count, output: count, cacheRead: count, cacheWrite: count, reasoning: count })
const attribution = z.strictObject({ provider: z.nullable(z.string()), model: z.nullable(z.string()) })

export const sessionStatsStateZod: ProjectionStateSchema<SessionStatsState> = z.strictObject({
  from: count,
  turns: count,
  steps: count,
  turnMs: ms,
  modelMs: ms,
  toolMs: ms,
  firstTokenCount: count,
  firstTokenMs: ms,
  byModel: z.array(
    z.strictObject({ provider: z.nullable(z.string()), model: z.nullable(z.string()), calls: count, callsWithoutUsage: count, tokens }),
  ),
  tools: z.array(z.strictObject({ name: z.string(), calls: count, errors: count, ms })),
  toolErrors: count,
  compactions: count,
  skipped: z.strictObject(Object.fromEntries(SKIP_REASONS.map((reason) => [reason, count])) as Record<SkipReason, typeof count>),
  turn: z.nullable(z.strictObject({ turn: z.number().check(finite), start: time })),
  step: z.nullable(
    z.strictObject({
      start: time,
      named: z.nullable(attribution),
      last: z.nullable(attribution),
      counted: z.array(z.strictObject({ provider: z.nullable(z.string()), model: z.nullable(z.string()), tokens })),
    }),
  ),
  segment: z.nullable(z.strictObject({ start: time, firstToken: z.boolean() })),
  pending: z.array(z.strictObject({ callId: z.string(), name: z.string(), start: time })),
})

const candidate = z.nullable(z.strictObject({ title: z.string().check(z.minLength(1)), seq: count }))

export const sessionTitleStateZod: ProjectionStateSchema<SessionTitleState> = z.strictObject({
  from: count,
  ownEvent: candidate,
  ownPrompt: candidate,
  inheritedEvent: candidate,
  inheritedPrompt: candidate,
  skipped: count,
})
