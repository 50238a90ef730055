import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { parsePriceTable, type SessionTitleState, sessionTitleUnit } from '../src/index.js'
import { priceTableSchema } from '../src/price-table-zod.js'
import { sessionStatsStateSchema } from '../src/state-schema.js'
import { type SessionStatsState, SKIP_REASONS } from '../src/stats-types.js'
import { sessionStatsStateZod, sessionTitleStateZod } from './zod-oracles.js'

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

/**
 * Whether the plain check and the zod oracle agree on `state`. They may differ
 * only where the state holds an object that is not plain (an inherited key,
 * which JSON never makes): zod reads inherited keys, the plain check refuses.
 */
function agree(fast: boolean, zod: boolean, state: unknown): boolean {
  return fast === zod || (!fast && zod && hasNonPlainObject(state))
}

function hasNonPlainObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false
  const prototype = Object.getPrototypeOf(value)
  if (prototype !== Object.prototype && prototype !== Array.prototype) return true
  return Object.values(value).some(hasNonPlainObject)
}

describe('sessionStats state schema', () => {
  it('accepts valid states, as the zod oracle does', () => {
    for (const state of [FULL, EMPTY]) {
      const parsed = sessionStatsStateSchema.safeParse(JSON.parse(JSON.stringify(state)))
      expect(parsed).toEqual({ success: true, data: state })
      expect(sessionStatsStateZod.safeParse(state).success).toBe(true)
    }
  })

  it('agrees with the zod oracle on 20000 mutated states, and a refused one is SESSION_STATS_INVALID_STATE naming a path', () => {
    const next = prng(7)
    let rejected = 0
    for (let i = 0; i < 20_000; i++) {
      const state = mutate(next() < 0.5 ? FULL : EMPTY, next)
      const fast = sessionStatsStateSchema.safeParse(state)
      const zod = sessionStatsStateZod.safeParse(state)
      expect(agree(fast.success, zod.success, state), JSON.stringify(state)).toBe(true)
      if (!fast.success) {
        rejected++
        expect(fast.error).toMatchObject({ code: 'SESSION_STATS_INVALID_STATE', details: { key: 'sessionStats' } })
      }
    }
    // Most mutations break the state; the rest (a count replaced by another count) stay valid.
    expect(rejected).toBeGreaterThan(10_000)
  })

  it('refuses a state with an inherited or extra key, a non-plain object, or the wrong type at the top', () => {
    const inherited = Object.assign(Object.create({ extra: 1 }), JSON.parse(JSON.stringify(FULL)))
    const inheritedTurn = { ...FULL, turn: Object.create({ turn: 1, start: null }) }
    for (const state of [inherited, inheritedTurn, { ...FULL, extra: 1 }, [FULL], null, 'state', 3])
      expect(sessionStatsStateSchema.safeParse(state).success).toBe(false)
  })
})

describe('sessionTitle state schema', () => {
  const FULL_TITLE: SessionTitleState = {
    from: 2,
    ownEvent: { title: 'Release plan', seq: 5 },
    ownPrompt: { title: 'Plan the release', seq: 2 },
    inheritedEvent: null,
    inheritedPrompt: { title: 'x', seq: 0 },
    skipped: 1,
  }

  it('agrees with the zod oracle on 20000 mutated states', () => {
    const next = prng(11)
    let rejected = 0
    for (let i = 0; i < 20_000; i++) {
      const state = mutate(FULL_TITLE, next)
      const fast = sessionTitleUnit.schema.safeParse(state)
      expect(agree(fast.success, sessionTitleStateZod.safeParse(state).success, state), JSON.stringify(state)).toBe(true)
      if (!fast.success) rejected++
    }
    expect(rejected).toBeGreaterThan(10_000)
  })

  it('names the unit and the first path that failed', () => {
    const parsed = sessionTitleUnit.schema.safeParse({ ...FULL_TITLE, ownPrompt: { title: '', seq: 2 } })
    expect(parsed.success).toBe(false)
    expect(!parsed.success && parsed.error).toMatchObject({
      code: 'SESSION_STATS_INVALID_STATE',
      details: { key: 'sessionTitle', path: 'ownPrompt.title' },
    })
    const stats = sessionStatsStateSchema.safeParse({ ...FULL, byModel: [{ ...FULL.byModel[0], tokens: { ...tokens, input: -1 } }] })
    expect(!stats.success && stats.error).toMatchObject({ details: { path: 'byModel.0.tokens.input' } })
    expect(!stats.success && (stats.error as Error).message).toContain("'sessionStats'")
    expect(sessionStatsStateSchema.safeParse({ ...FULL, extra: 1 })).toMatchObject({ error: { details: { path: 'extra' } } })
    expect(sessionStatsStateSchema.safeParse({ ...EMPTY, turn: undefined })).toMatchObject({ error: { details: { path: 'turn' } } })
    expect(sessionStatsStateSchema.safeParse([])).toMatchObject({ error: { details: { path: '(root)' } } })
  })
})

describe('price table check', () => {
  const TABLE = {
    description: 'two providers',
    currency: 'USD',
    providers: { p: { m: { input: 1, output: 4, cacheRead: 0.1 }, n: { input: 0, output: 0, reasoning: 2 } }, q: {} },
  }

  it('accepts and refuses what the zod schema does, on 5000 mutated tables', async () => {
    const next = prng(13)
    for (let i = 0; i < 5_000; i++) {
      const table = mutate(TABLE, next)
      const zod = priceTableSchema.safeParse(table)
      const parsed = await parsePriceTable(table).then(
        () => true,
        (error: unknown) => {
          expect(error).toMatchObject({ code: 'SESSION_STATS_INVALID_PRICE_TABLE' })
          return false
        },
      )
      expect(parsed, JSON.stringify(table)).toBe(zod.success)
      if (parsed) expect(await parsePriceTable(table)).toEqual(zod.data)
    }
  })

  it('accepts a table without a prototype, as zod does', async () => {
    const table = Object.assign(Object.create(null), { currency: 'USD', providers: {} })
    await expect(parsePriceTable(table)).resolves.toEqual({ currency: 'USD', providers: {} })
  })
})
