import { subagentList } from '@dsh/protocol'
import type { PriceTable } from '@dsh/session-stats'
import { createScriptedDriver } from '@dsh/subagent'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Gates, type Stack, startStack } from './support/stack.js'

// GET /api/sessions/:id/subagents prices each row with the server's price table, as the listing prices an entry.

const PRICES: PriceTable = { currency: 'USD', providers: { p: { m: { input: 1, output: 2, cacheRead: 0.5 } } } }

/**
 * A stack whose children make one model call each and nothing else (the
 * scripted driver's closing message would be a call naming no model):
 * `cost-priced` on a priced model, `cost-unpriced` on one the table lacks.
 */
async function seeded(prices?: PriceTable): Promise<Stack> {
  const gates = new Gates()
  const driver = createScriptedDriver((run) => {
    const gate = gates.get(run.session.id)
    return [
      run.session.id === 'cost-priced'
        ? { kind: 'step', provider: 'p', model: 'm', usage: { input: 40, output: 10, cacheRead: 5, reasoning: 2 } }
        : { kind: 'step', provider: 'p', model: 'other', usage: { input: 7, output: 1 } },
      ...(gate === undefined ? [] : [{ kind: 'until' as const, promise: gate }]),
    ]
  })
  const stack = await startStack({ driver, ...(prices === undefined ? {} : { wrap: (services) => ({ ...services, prices }) }) })
  const parent = stack.sessions.create({ id: 'cost-parent' })
  // The child stays mid-turn until its grandchild is done, so it can spawn one.
  gates.hold('cost-priced')
  const child = stack.subagents.spawn(parent, { mode: 'one-shot', label: 'priced', context: 'fresh', prompt: 'a', id: 'cost-priced' })
  await stack.subagents.spawn(child.session, { mode: 'one-shot', context: 'fresh', prompt: 'b', id: 'cost-unpriced' }).done
  gates.release('cost-priced')
  await child.done
  return stack
}

let priced: Stack
let plain: Stack
beforeAll(async () => {
  priced = await seeded(PRICES)
  plain = await seeded()
})
afterAll(async () => {
  await priced.close()
  await plain.close()
})

const rowsOf = async (stack: Stack, scope: string) =>
  subagentList.parse((await stack.get(`/api/sessions/cost-parent/subagents?scope=${scope}`)).body).rows

describe('subagent row cost', () => {
  it("is the child's own usage under the server's price table; null with the reason for a model the table does not price", async () => {
    const rows = await rowsOf(priced, 'descendants')
    expect(rows.map((row) => [row.id, row.tokens])).toEqual([
      ['cost-priced', 57],
      ['cost-unpriced', 8],
    ])
    // 40 input at $1, 10 output at $2, 5 cache reads at $0.5, 2 reasoning at the output price, per million tokens.
    expect(rows[0]?.cost).toBe(66.5e-6)
    expect(rows[0]).not.toHaveProperty('costReason')
    expect(rows[1]?.cost).toBeNull()
    expect(rows[1]?.costReason).toBe('unknown-model')
    const children = await rowsOf(priced, 'children')
    expect(children.map((row) => row.id)).toEqual(['cost-priced'])
    expect(children[0]?.cost).toBe(66.5e-6)
  })

  it('is absent from every row of a server without a price table (the body `dsh agents --json` prints)', async () => {
    const rows = await rowsOf(plain, 'descendants')
    expect(rows.map((row) => [row.id, row.tokens, 'cost' in row, 'costReason' in row])).toEqual([
      ['cost-priced', 57, false, false],
      ['cost-unpriced', 8, false, false],
    ])
  })
})
