import { describe, expect, it } from 'vitest'
import { renderListAgents, toListAgentsRow } from '../src/list-agents-table.js'

const child = { kind: 'child', id: 'c' as never, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'scan' } as const
const entry = {
  row: child,
  rung: 2,
  parentId: 'p' as never,
  depth: 1,
  tokens: 120,
  durationMs: 2500,
  startedAt: 1000,
  endedAt: 4000,
} as const

describe('the agents table: cost', () => {
  it('a priced row shows its USD; an unpriced one a marker with its reason, never a blank', () => {
    expect(renderListAgents([toListAgentsRow({ ...entry, cost: 0.00018 }, 0, true)])).toBe(
      'c  ready  one-shot  "scan"  120 tokens  2.5s  $0.000180',
    )
    const unknown = toListAgentsRow({ ...entry, cost: null, costReason: 'unknown-model' }, 0, true)
    expect(unknown).toMatchObject({ cost: null, costReason: 'unknown-model' })
    expect(renderListAgents([unknown])).toBe('c  ready  one-shot  "scan"  120 tokens  2.5s  $– (unknown-model)')
    // A null cost whose pricing gave no reason is still marked unknown.
    expect(renderListAgents([toListAgentsRow({ ...entry, cost: null }, 0, true)])).toBe('c  ready  one-shot  "scan"  120 tokens  2.5s  $–')
  })

  it('a row not priced at all (no price table) shows no cost, and a reason never rides on a known cost', () => {
    expect(renderListAgents([toListAgentsRow(entry, 0, true)])).toBe('c  ready  one-shot  "scan"  120 tokens  2.5s')
    expect(toListAgentsRow({ ...entry, cost: 1, costReason: 'unknown-model' }, 0, true)).not.toHaveProperty('costReason')
  })
})
