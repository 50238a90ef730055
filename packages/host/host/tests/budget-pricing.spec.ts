import { createHost, type Host } from '@dsh/host'
import type { Session, SessionEvent } from '@dsh/session'
import { parsePriceTable } from '@dsh/session-stats'
import { createScriptedDriver, type ScriptStep, type SubagentRun } from '@dsh/subagent'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'

// Cost budgets of subagents priced by a real price table: the host turns
// `prices` into the runtime's pricing through @dsh/session-stats' costOf.

const prices = await parsePriceTable({
  currency: 'USD',
  providers: { fake: { 'm-1': { input: 1, output: 2 } } },
})
const model = { provider: 'fake', model: 'm-1' }

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function host(scripts: Record<string, ScriptStep[]>, withPrices = true): Promise<Host> {
  const { dir: root, cleanup } = tempDir('dsh-budget-pricing-', { memory: true })
  cleanups.push(cleanup)
  const driver = createScriptedDriver((run: SubagentRun) => scripts[run.identity?.label ?? ''] ?? [], { model })
  const h = await createHost({ root, driver, ...(withPrices ? { prices } : {}) })
  cleanups.push(() => h.dispose())
  return h
}

function counted(session: Session): SessionEvent[] {
  return session.events.filter((event) => event.type === 'step/end' && (event.data as { usage?: unknown }).usage !== undefined)
}

function code(op: () => unknown): string {
  try {
    op()
  } catch (error) {
    return (error as { code?: string }).code ?? String(error)
  }
  return 'resolved'
}

describe('subagent cost budgets under a price table', () => {
  it('prices every step by the table and stops the child at the step whose cost crosses the budget', async () => {
    const step: ScriptStep = { kind: 'step', usage: { input: 30, output: 10 } }
    const h = await host({ worker: [step, step, step, step, step, { kind: 'message', text: 'done' }] })
    const parent = h.sessions.create()
    // 30 input + 10 output tokens cost 5e-5 USD a step: the third takes the sum to 1.5e-4, past 1.2e-4.
    const child = h.subagents.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxCostUsd: 0.00012 } })
    const settled = await child.done
    expect(counted(child.session)).toHaveLength(3)
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'cost', limit: 0.00012 } })
    expect(settled.exceeded!.spent).toBeCloseTo(0.00015, 12)
  })

  it('fails closed: a model the table does not price is refused at spawn; so is any cost budget on a host without a table', async () => {
    const h = await host({})
    const parent = h.sessions.create()
    const spawn = (settings: Record<string, unknown>) => () =>
      h.subagents.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: settings as never })
    expect(code(spawn({ maxCostUsd: 1, model: 'm-2' }))).toBe('SUBAGENT_BUDGET_UNPRICED')
    expect(h.sessions.list().map((session) => session.id)).toEqual([parent.id])

    const bare = await host({}, false)
    const top = bare.sessions.create()
    expect(code(() => bare.subagents.spawn(top, { mode: 'one-shot', context: 'fresh', settings: { maxCostUsd: 1 } }))).toBe(
      'SUBAGENT_BUDGET_UNPRICED',
    )
  })

  it('fails closed at a step: cached tokens the table has no price for end the child, missing-price', async () => {
    const h = await host({
      worker: [
        { kind: 'step', usage: { input: 10, output: 0 } },
        { kind: 'step', usage: { input: 10, output: 0, cacheRead: 500 } },
        { kind: 'step', usage: { input: 10, output: 0 } },
        { kind: 'message', text: 'done' },
      ],
    })
    const parent = h.sessions.create()
    const child = h.subagents.spawn(parent, { mode: 'one-shot', label: 'worker', context: 'fresh', settings: { maxCostUsd: 1 } })
    const settled = await child.done
    expect(counted(child.session)).toHaveLength(2)
    expect(settled).toMatchObject({ end: 'budget', exceeded: { kind: 'cost', limit: 1, unpriced: 'missing-price' } })
  })
})
