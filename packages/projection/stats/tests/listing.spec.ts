import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createProjectionRegistry } from '@dsh/session-projection'
import { describe, expect, it } from 'vitest'
import {
  catalogListingCosts,
  LISTING_KEYS,
  LISTING_UNITS,
  listedViews,
  listingValues,
  listingValuesOfStates,
  type PriceTable,
  parsePriceTable,
  type RollupInput,
  type SessionStats,
  totalTokens,
  treeListingCosts,
} from '../src/index.js'
import { host } from './helpers.js'

const TABLE: PriceTable = await parsePriceTable({ currency: 'USD', providers: { p: { m: { input: 1, output: 4 } } } })

const turn = (model: string) => [
  { type: 'user/message', data: { text: '  Plan the\n release ' } },
  { type: 'turn/start', data: { turn: 1 } },
  { type: 'step/start', data: { turn: 1, step: 0, provider: 'p', model } },
  { type: 'assistant/message', data: { turn: 1, text: 'ok' } },
  { type: 'step/end', data: { turn: 1, step: 0, usage: { input: 100, output: 20 }, finish: 'stop' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
]

/** The states a checkpoint stores for a session that played `script`, as a cache reader decodes them (JSON round trip). */
function cachedStates(model: string) {
  const h = host()
  const session = h.sessions.create()
  h.play(session, turn(model))
  const rows = h.projections.checkpoint(session, LISTING_KEYS)
  const states: Record<string, unknown> = {}
  for (const { key, stateVersion } of LISTING_UNITS) {
    const row = rows[key]
    expect(row?.stateVersion).toBe(stateVersion)
    states[key] = JSON.parse(JSON.stringify(row?.state))
  }
  return { h, session, states }
}

describe('listing values', () => {
  it('come from cached states checked against the units: title, all tokens, cost under the price table', () => {
    const { states } = cachedStates('m')
    const values = listingValuesOfStates(states, TABLE)
    expect(values).toMatchObject({ title: 'Plan the release', tokens: 120 })
    expect(values.cost).toBeCloseTo((100 * 1 + 20 * 4) / 1e6, 12)
    // Without a price table the cost is unknown, never 0.
    expect(listingValuesOfStates(states)).toEqual({ title: 'Plan the release', tokens: 120, cost: null, costReason: 'no-price-table' })
    expect(values).not.toHaveProperty('costReason')
  })

  it('an unknown model costs null with its reason, not 0', () => {
    const { states } = cachedStates('not-in-the-table')
    expect(listingValuesOfStates(states, TABLE)).toEqual({
      title: 'Plan the release',
      tokens: 120,
      cost: null,
      costReason: 'unknown-model',
    })
  })

  it("a tree's costs: each session's own, null with the reason for one not read or using a model without a price", () => {
    const priced = cachedStates('m')
    const unpriced = cachedStates('not-in-the-table')
    const view = (c: ReturnType<typeof cachedStates>) => c.h.projections.snapshot(c.session, LISTING_KEYS).sessionStats as SessionStats
    const entries: RollupInput[] = [
      { id: 'root', status: 'ok', snapshot: { sessionStats: view(priced) } },
      { id: 'child', status: 'ok', snapshot: { sessionStats: view(unpriced) } },
      { id: 'gone', status: 'unavailable', problem: { message: 'not readable now' } },
      { id: 'cold', status: 'ok', snapshot: {} },
    ]
    const reasons = treeListingCosts(entries, TABLE)
    expect([...reasons.keys()]).toEqual(['root', 'child', 'gone', 'cold'])
    expect(reasons.get('root')?.cost).toBeCloseTo((100 * 1 + 20 * 4) / 1e6, 12)
    expect([...reasons]).toEqual([
      ['root', { cost: reasons.get('root')?.cost }],
      ['child', { cost: null, costReason: 'unknown-model' }],
      ['gone', { cost: null, costReason: 'stats-unavailable' }],
      ['cold', { cost: null, costReason: 'stats-unavailable' }],
    ])
  })

  it("a catalog's costs read its tree no deeper than its rows: one generation for children, the whole tree for descendants", async () => {
    const asked: unknown[] = []
    const source = {
      async treeSnapshots(rootId: string, keys: readonly 'sessionStats'[], options: object) {
        asked.push({ rootId, keys, options })
        return [{ id: 'root', status: 'ok' as const, snapshot: {} }]
      },
    }
    expect(await catalogListingCosts(source, 'root', 'children', TABLE)).toEqual(
      new Map([['root', { cost: null, costReason: 'stats-unavailable' }]]),
    )
    await catalogListingCosts(source, 'root', 'descendants', TABLE)
    expect(asked).toEqual([
      { rootId: 'root', keys: ['sessionStats'], options: { descendants: true, maxDepth: 1 } },
      { rootId: 'root', keys: ['sessionStats'], options: { descendants: true } },
    ])
  })

  it('a miss or a state that fails its unit schema is unknown, never shown', () => {
    const { states } = cachedStates('m')
    expect(listingValuesOfStates({}, TABLE)).toEqual({ title: null, tokens: null, cost: null, costReason: 'stats-unavailable' })
    const forged = { ...states, sessionTitle: { ...(states.sessionTitle as object), extra: 1 } }
    expect(listingValuesOfStates(forged, TABLE).title).toBeNull()
    const negative = { ...states, sessionStats: { ...(states.sessionStats as object), turns: -1 } }
    expect(listingValuesOfStates(negative, TABLE)).toEqual({
      title: 'Plan the release',
      tokens: null,
      cost: null,
      costReason: 'stats-unavailable',
    })
  })

  it("a live session's values come from its own views, the same as its checkpoint's", () => {
    const { h, session, states } = cachedStates('m')
    const record = { header: session.header, inheritedEventCount: session.inheritedEventCount, live: true }
    const views = listedViews(record, { sessions: h.sessions, projections: h.projections })
    expect(views?.sessionStats && totalTokens(views.sessionStats.tokens)).toBe(120)
    expect(listingValues(views, TABLE)).toEqual(listingValuesOfStates(states, TABLE))
  })

  it('a cold session without a cache, or a host without the units, has no values (no log is read)', () => {
    const { h, session } = cachedStates('m')
    const cold = { header: session.header, inheritedEventCount: session.inheritedEventCount, live: false }
    expect(listedViews(cold, { sessions: h.sessions, projections: h.projections })).toBeUndefined()
    const ctx = new Context()
    const sessions = new SessionStore(ctx)
    const bare = createProjectionRegistry(ctx)
    const other = sessions.create()
    const record = { header: other.header, inheritedEventCount: 0, live: true }
    expect(listedViews(record, { sessions, projections: bare })).toBeUndefined()
    expect(listingValues(undefined, TABLE)).toEqual({ title: null, tokens: null, cost: null, costReason: 'stats-unavailable' })
  })
})
