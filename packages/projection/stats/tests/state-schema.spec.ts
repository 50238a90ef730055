import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { sessionStatsStateSchema } from '../src/state-schema.js'
import { type SessionStatsState, SKIP_REASONS, sessionStatsStateZod } from '../src/stats-types.js'

const tokens = { input: 120, output: 30, cacheRead: 7, cacheWrite: 0, reasoning: 2 }
const skipped = Object.fromEntries(SKIP_REASONS.map((reason, i) => [reason, i]))
const FULL: SessionStatsState = {
  from: 3,
  turns: 2,
  steps: 4,
  turnMs: 1500.5,
  modelMs: 900,
  toolMs: 0,
  firstTokenCount: 2,
  firstTokenMs: 80.25,
  byModel: [{ provider: 'openai', model: null, calls: 4, callsWithoutUsage: 1, tokens }],
  tools: [{ name: 'ls', calls: 3, errors: 1, ms: 12 }],
  toolErrors: 1,
  compactions: 0,
  skipped: skipped as SessionStatsState['skipped'],
  turn: { turn: 3, start: null },
  step: {
    start: 10,
    named: { provider: null, model: 'm' },
    last: null,
    counted: [{ provider: 'p', model: 'm', tokens }],
  },
  segment: { start: -5, firstToken: false },
  pending: [{ callId: 'c1', name: 'ls', start: null }],
}
const EMPTY: SessionStatsState = {
  ...FULL,
  byModel: [],
  tools: [],
  turn: null,
  step: null,
  segment: null,
  pending: [],
}

/** Values a mutation puts in place of a field: some valid for some fields, most invalid for any. */
const ODD: readonly unknown[] = [
  undefined,
  null,
  -1,
  -0,
  0,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 53,
  '',
  'x',
  true,
  [],
  {},
  [1],
  { turn: 1, start: null },
  Object.create({ turn: 1, start: null }),
]

/** A deep copy of `state` with one field (at any depth) replaced, deleted, or joined by an extra key. */
function mutate(state: unknown, next: () => number): unknown {
  const copy: unknown = JSON.parse(JSON.stringify(state))
  const holders: Array<Record<string, unknown> | unknown[]> = []
  const walk = (value: unknown): void => {
    if (typeof value !== 'object' || value === null) return
    holders.push(value as Record<string, unknown>)
    for (const inner of Object.values(value)) walk(inner)
  }
  walk(copy)
  const holder = holders[Math.floor(next() * holders.length)]!
  const keys = Object.keys(holder)
  const key = keys[Math.floor(next() * keys.length)]
  const roll = next()
  if (key === undefined || roll < 0.1) (holder as Record<string, unknown>).extra = 1
  else if (roll < 0.2) delete (holder as Record<string, unknown>)[key]
  else (holder as Record<string, unknown>)[key] = ODD[Math.floor(next() * ODD.length)]
  return copy
}

describe('sessionStats state schema', () => {
  it('accepts valid states without zod, as zod does', () => {
    for (const state of [FULL, EMPTY]) {
      const parsed = sessionStatsStateSchema.safeParse(JSON.parse(JSON.stringify(state)))
      expect(parsed).toEqual({ success: true, data: state })
      expect(sessionStatsStateZod.safeParse(state).success).toBe(true)
    }
  })

  it('agrees with the zod schema on 20000 mutated states, and a refused one carries zod issues', () => {
    const next = prng(7)
    let rejected = 0
    for (let i = 0; i < 20_000; i++) {
      const state = mutate(next() < 0.5 ? FULL : EMPTY, next)
      const fast = sessionStatsStateSchema.safeParse(state)
      const zod = sessionStatsStateZod.safeParse(state)
      expect(fast.success, JSON.stringify(state)).toBe(zod.success)
      if (!fast.success) {
        rejected++
        expect(fast.error).toBeDefined()
      }
    }
    // Most mutations break the state; the rest (a count replaced by another count) stay valid.
    expect(rejected).toBeGreaterThan(10_000)
  })

  it('refuses a state with an inherited or extra key, a non-plain object, or the wrong type at the top', () => {
    const inherited = Object.assign(Object.create({ extra: 1 }), JSON.parse(JSON.stringify(FULL)))
    for (const state of [inherited, { ...FULL, extra: 1 }, [FULL], null, 'state', 3]) {
      expect(sessionStatsStateSchema.safeParse(state).success).toBe(sessionStatsStateZod.safeParse(state).success)
      expect(sessionStatsStateSchema.safeParse(state).success).toBe(false)
    }
  })
})
