import { describe, expect, it } from 'vitest'
import { costOf, parsePriceTable, reportSessionStats, rollupSessionStats, sumSessionStats, totalTokens } from '../src/index.js'
import { host, SECOND_TURN, TWO_TURNS } from './helpers.js'

describe('rollupSessionStats', () => {
  it('sums a parent and a fork without counting the inherited prefix twice', () => {
    const h = host()
    const parent = h.sessions.create()
    h.play(parent, TWO_TURNS.slice(0, SECOND_TURN))
    const fork = h.sessions.fork(parent)
    h.play(fork, TWO_TURNS.slice(SECOND_TURN))
    const whole = h.sessions.create()
    h.play(whole, TWO_TURNS)
    const rollup = rollupSessionStats([
      { id: parent.id, status: 'ok', snapshot: { sessionStats: h.stats(parent) } },
      { id: fork.id, status: 'ok', snapshot: { sessionStats: h.stats(fork) } },
    ])
    // Parent (turn 1) plus the fork's own suffix (turn 2 and the compaction) is the one session that did both.
    const { inheritedEventCount: _cut, ...expected } = h.stats(whole)
    expect(h.stats(fork).inheritedEventCount).toBe(SECOND_TURN)
    expect(rollup).toEqual({ sessions: 2, totals: expected, gaps: [], complete: true })
  })

  it('merges models by provider and model and tools by name, and prices the totals', async () => {
    const h = host()
    const a = h.sessions.create()
    const b = h.sessions.create()
    h.play(a, TWO_TURNS)
    h.play(b, TWO_TURNS)
    const totals = sumSessionStats([h.stats(a), h.stats(b)])
    expect(totals.turns).toBe(4)
    expect(totals.tokens).toEqual({ input: 294, output: 76, cacheRead: 100, cacheWrite: 0, reasoning: 10 })
    expect(totals.byModel.map((usage) => [usage.provider, usage.model, usage.calls])).toEqual([
      ['example-provider', 'example-model', 6],
      [null, null, 4],
    ])
    expect(totals.tools).toEqual([
      { name: 'read_file', calls: 2, errors: 0, ms: 80 },
      { name: 'ls', calls: 2, errors: 2, ms: 20 },
    ])
    expect(totals.firstToken).toEqual({ count: 6, totalMs: 240, meanMs: 40 })
    const table = await parsePriceTable({
      currency: 'USD',
      providers: { 'example-provider': { 'example-model': { input: 1, output: 1, cacheRead: 1 } } },
    })
    expect(costOf(totals, table)).toMatchObject({ usd: null, reason: 'model-not-recorded' })
  })

  it('reports unavailable and corrupt sessions as gaps, never skipping them silently', () => {
    const h = host()
    const a = h.sessions.create()
    h.play(a, TWO_TURNS)
    const rollup = rollupSessionStats([
      { id: a.id, status: 'ok', snapshot: { sessionStats: h.stats(a) } },
      { id: 'gone', status: 'unavailable', problem: { message: 'disk went away' } },
      { id: 'broken', status: 'corrupt', problem: { code: 'SESSION_QUERY_CORRUPT_SESSION', message: 'line 3' } },
      { id: 'valueless', status: 'ok', snapshot: {} },
    ])
    expect(rollup.sessions).toBe(1)
    expect(rollup.complete).toBe(false)
    expect(rollup.gaps).toEqual([
      { id: 'gone', status: 'unavailable', problem: { message: 'disk went away' } },
      { id: 'broken', status: 'corrupt', problem: { code: 'SESSION_QUERY_CORRUPT_SESSION', message: 'line 3' } },
      { id: 'valueless', status: 'unavailable', problem: { message: 'the sessionStats unit gave no value' } },
    ])
    expect(rollup.totals.turns).toBe(2)
  })

  it('sums nothing to zeros', () => {
    expect(rollupSessionStats([]).totals).toMatchObject({ turns: 0, tokens: { input: 0, output: 0 }, firstToken: { meanMs: null } })
  })
})

describe('reportSessionStats', () => {
  it('lines up each session (title, own tokens, turn time, gaps) with the rollup, and prices it only with a table', async () => {
    const h = host()
    const parent = h.sessions.create()
    h.play(parent, TWO_TURNS.slice(0, SECOND_TURN))
    const fork = h.sessions.fork(parent)
    h.play(fork, TWO_TURNS.slice(SECOND_TURN))
    const snapshot = (s: typeof parent) => h.projections.snapshot(s, ['sessionStats', 'sessionTitle'])
    const entries = [
      {
        id: parent.id,
        parentId: undefined,
        depth: 0,
        subagent: false,
        rung: 1 as const,
        status: 'ok' as const,
        snapshot: snapshot(parent),
      },
      { id: fork.id, parentId: parent.id, depth: 1, subagent: true, rung: 1 as const, status: 'ok' as const, snapshot: snapshot(fork) },
      {
        id: 'gone',
        parentId: parent.id,
        depth: 1,
        subagent: true,
        rung: 3 as const,
        status: 'unavailable' as const,
        problem: { message: 'x' },
      },
    ]
    const report = reportSessionStats(parent.id, 'descendants', entries)
    expect(report.title).toBe('Release plan')
    expect(report.sessions.map((s) => [s.id, s.depth, s.title, s.tokens, s.status])).toEqual([
      [parent.id, 0, 'Release plan', totalTokens(h.stats(parent).tokens), 'ok'],
      [fork.id, 1, 'go on', totalTokens(h.stats(fork).tokens), 'ok'],
      ['gone', 1, null, null, 'unavailable'],
    ])
    expect(report.sessions[0]?.turnMs).toBe(h.stats(parent).turnMs)
    expect(report.rollup.gaps.map((gap) => gap.id)).toEqual(['gone'])
    expect(report).toMatchObject({ cost: null, costReason: 'no-price-table' })
    const priced = reportSessionStats(parent.id, 'descendants', entries, await parsePriceTable({ currency: 'USD', providers: {} }))
    // The tree has a gap ('gone'): the total is incomplete, whatever its models' reasons.
    expect(priced.cost).toMatchObject({ usd: null, reason: 'incomplete' })
    expect(priced.cost?.byModel.map((cost) => cost.usd === null && cost.reason)).toContain('model-not-recorded')
    expect(priced).not.toHaveProperty('costReason')
  })
  it('a rollup with gaps has no cost: usd null, reason incomplete, the priced part a lower bound', async () => {
    const h = host()
    const parent = h.sessions.create()
    h.play(parent, [
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'step/start', data: { turn: 1, step: 0, provider: 'p', model: 'm' } },
      { type: 'step/end', data: { turn: 1, step: 0, usage: { input: 1000, output: 234 }, finish: 'stop' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ])
    const table = await parsePriceTable({ currency: 'USD', providers: { p: { m: { input: 1, output: 1 } } } })
    const root = { id: parent.id, parentId: undefined, depth: 0, subagent: false, rung: 1 as const, status: 'ok' as const }
    const ok = { ...root, snapshot: { sessionStats: h.stats(parent) } }
    const lost = {
      id: 'lost',
      parentId: parent.id,
      depth: 1,
      subagent: true,
      rung: 3 as const,
      status: 'corrupt' as const,
      problem: { code: 'SESSION_PERSISTENCE_CORRUPT', message: 'unreadable' },
    }
    expect(reportSessionStats(parent.id, 'descendants', [ok], table).cost).toEqual({
      usd: expect.closeTo(0.001234, 15),
      byModel: [{ provider: 'p', model: 'm', usd: expect.closeTo(0.001234, 15) }],
    })
    const report = reportSessionStats(parent.id, 'descendants', [ok, lost], table)
    expect(report.rollup.complete).toBe(false)
    expect(report.cost).toEqual({
      usd: null,
      reason: 'incomplete',
      byModel: [{ provider: 'p', model: 'm', usd: expect.closeTo(0.001234, 15) }],
      pricedUsd: expect.closeTo(0.001234, 15),
    })
    // A model without a price keeps its own reason in byModel; the total is incomplete first.
    const unpriced = reportSessionStats(parent.id, 'descendants', [ok, lost], await parsePriceTable({ currency: 'USD', providers: {} }))
    expect(unpriced.cost).toEqual({
      usd: null,
      reason: 'incomplete',
      byModel: [{ provider: 'p', model: 'm', usd: null, reason: 'unknown-model' }],
      pricedUsd: 0,
    })
  })
})
