import { describe, expect, it } from 'vitest'
import { wireSessionList, wireSubagentRow } from '../src/bodies.js'
import { sessionListPage, sessionStatsReport, subagentListRow } from '../src/index.js'

const header = {
  version: 1 as const,
  id: 'child-1',
  createdAt: 1_700_000_000_000,
  parentSession: 'parent',
  isSeeded: false,
  delegationDepth: 1,
  origin: 'subagent' as const,
}
const record = { header, inheritedEventCount: 0, live: false, persisted: true }

describe('why a cost is unknown travels beside the null', () => {
  it('a listing entry carries costReason beside a null cost, never beside a number, and the page parses', () => {
    const page = wireSessionList({ records: [record, { ...record, header: { ...header, id: 'child-2' } }] }, [
      { title: null, tokens: 5, cost: null, costReason: 'unknown-model' },
      { title: null, tokens: 5, cost: 0.5, costReason: 'unknown-model' },
    ])
    expect(page.sessions.map((s) => [s.cost, s.costReason])).toEqual([
      [null, 'unknown-model'],
      [0.5, undefined],
    ])
    expect(sessionListPage.parse(page)).toEqual(page)
    expect(() => sessionListPage.parse({ sessions: [{ ...page.sessions[0], costReason: 'free' }] })).toThrow()
  })

  it('a catalog row carries costReason beside a null cost, and parses', () => {
    const row = wireSubagentRow({
      row: { kind: 'child', id: 'child-1', activity: 'inactive', hasChildren: false, mode: 'one-shot' },
      rung: 2,
      parentId: 'parent',
      depth: 1,
      cost: null,
      costReason: 'usage-not-recorded',
    })
    expect(row).toMatchObject({ cost: null, costReason: 'usage-not-recorded' })
    expect(
      subagentListRow.parse(
        wireSubagentRow({
          row: { kind: 'child', id: 'c', activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'l' },
          rung: 1,
          parentId: 'p',
          depth: 1,
          closed: true,
        }),
      ),
    ).toMatchObject({ closed: true })
    expect(subagentListRow.parse(row)).toEqual(row)
    expect(
      wireSubagentRow({
        row: { kind: 'diagnostic', id: 'c', reason: 'corrupt' },
        rung: 3,
        parentId: 'p',
        depth: 1,
        cost: 1,
        costReason: 'unknown-model',
      }),
    ).not.toHaveProperty('costReason')
  })

  it('a stats report whose rollup has gaps has cost usd null for reason incomplete, with the priced part', () => {
    const tokens = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, reasoning: 0 }
    const totals = {
      turns: 1,
      steps: 1,
      turnMs: 1,
      modelMs: 1,
      toolMs: 0,
      firstToken: { count: 0, totalMs: 0, meanMs: null },
      tokens,
      byModel: [{ provider: 'p', model: 'm', calls: 1, callsWithoutUsage: 0, tokens }],
      tools: [],
      toolCalls: 0,
      toolErrors: 0,
      compactions: 0,
      skipped: {},
    }
    const report = {
      id: 'parent',
      scope: 'descendants',
      title: null,
      sessions: [],
      rollup: { sessions: 2, totals, gaps: [{ id: 'child-2', status: 'unavailable' }], complete: false },
      cost: { usd: null, reason: 'incomplete', byModel: [], pricedUsd: 0.25 },
    }
    expect(sessionStatsReport.parse(report).cost).toEqual(report.cost)
  })
})
