import { describe, expect, it } from 'vitest'
import { z } from 'zod/mini'
import { subagentIdentityUnit, subagentTimingUnit } from '../src/index.js'
import { isIdentityState, isTimingState } from '../src/state-checks.js'

// The units' state rules written in zod: the oracle the plain checks are held to.
const seq = z.int().check(z.nonnegative())
const identityZod = z.strictObject({
  identity: z.exactOptional(
    z.discriminatedUnion('mode', [
      z.strictObject({ mode: z.literal('one-shot'), label: z.exactOptional(z.string()), seq }),
      z.strictObject({ mode: z.literal('continuable'), label: z.string(), seq }),
    ]),
  ),
})
const timingZod = z.strictObject({
  settledMs: z.number().check(z.nonnegative()),
  activeTurn: z.exactOptional(z.strictObject({ turn: z.number(), startedAt: z.number() })),
  startedAt: z.exactOptional(z.number()),
  endedAt: z.exactOptional(z.number()),
})

const ODD: readonly unknown[] = [
  undefined,
  null,
  -1,
  -0,
  0,
  7,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 53,
  '',
  'x',
  'one-shot',
  'continuable',
  true,
  [],
  {},
  [1],
  { turn: 1, startedAt: 2 },
  { mode: 'one-shot', seq: 1 },
]

/** Every state one edit away from `state`: each field (at any depth) replaced by each odd value or deleted, and an extra key in each object. */
function neighbours(state: unknown): unknown[] {
  const out: unknown[] = []
  const paths: string[][] = []
  const walk = (value: unknown, path: string[]): void => {
    if (typeof value !== 'object' || value === null) return
    paths.push(path)
    for (const [key, inner] of Object.entries(value)) walk(inner, [...path, key])
  }
  walk(state, [])
  for (const path of paths) {
    const edit = (change: (holder: Record<string, unknown>) => void): void => {
      const copy = structuredClone(state) as Record<string, unknown>
      change(path.reduce<Record<string, unknown>>((holder, key) => holder[key] as Record<string, unknown>, copy))
      out.push(copy)
    }
    const holder = path.reduce<unknown>((value, key) => (value as Record<string, unknown>)[key], state) as Record<string, unknown>
    edit((h) => {
      h.extra = 1
    })
    for (const key of Object.keys(holder)) {
      edit((h) => {
        delete h[key]
      })
      for (const odd of ODD)
        edit((h) => {
          h[key] = odd
        })
    }
  }
  return out
}

const IDENTITIES = [
  {},
  { identity: { mode: 'one-shot', seq: 3 } },
  { identity: { mode: 'one-shot', label: 'a', seq: 0 } },
  { identity: { mode: 'continuable', label: '', seq: 12 } },
]
const TIMINGS = [
  { settledMs: 0 },
  { settledMs: 1520.5 },
  { settledMs: 7, activeTurn: { turn: 2, startedAt: -4 } },
  { settledMs: 7, activeTurn: { turn: 2, startedAt: 100 }, startedAt: 90, endedAt: 1_700_000_000_000.5 },
]

describe('catalog state checks', () => {
  it('accept and refuse exactly what the zod schemas do, one edit away from each valid state', () => {
    let refused = 0
    for (const [check, zod, states] of [
      [isIdentityState, identityZod, IDENTITIES],
      [isTimingState, timingZod, TIMINGS],
    ] as const)
      for (const state of states) {
        expect(check(state)).toBe(true)
        for (const near of [...neighbours(state), ...ODD]) {
          expect(check(near), JSON.stringify(near)).toBe(zod.safeParse(near).success)
          if (!check(near)) refused++
        }
      }
    expect(refused).toBeGreaterThan(300)
  })

  it('the units accept a state through the plain check as it is, and refuse what it refuses with an issue naming the unit', () => {
    const identity = { identity: { mode: 'continuable', label: 'x', seq: 4 } }
    expect(subagentIdentityUnit.schema.safeParse(identity)).toEqual({ success: true, data: identity })
    // A row is JSON: an object with a prototype of its own never comes from one, and the plain check refuses it.
    const inherited = Object.assign(Object.create({ activeTurn: { turn: 1, startedAt: 0 } }), { settledMs: 3 })
    expect(isTimingState(inherited)).toBe(false)
    expect(subagentTimingUnit.schema.safeParse(inherited).success).toBe(false)
    const refused = subagentTimingUnit.schema.safeParse({ settledMs: -1 })
    expect(refused.success).toBe(false)
    expect(!refused.success && (refused.error as { issues: Array<{ message: string }> }).issues[0]?.message).toContain("'subagentTiming'")
  })
})
