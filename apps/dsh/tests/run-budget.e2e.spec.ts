import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { answer, callTools, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { lastUser, scratch } from './support/conversation.js'
import { cleanEnv, dshRun, history } from './support/dsh-process.js'

// A budget stop through `dsh run`: the built CLI in its own process, a local
// Chat Completions server (the only fake) reporting usage on every response.
const KEY = 'sk-e2e-budget-7c1d'

const t = scratch('dsh-run-budget-')
const env = () => cleanEnv({ DSH_API_KEY: KEY })
const dsh = (args: string[]) => dshRun(args, env())

const CHILD_PROMPT = 'list your subagents until told to stop'
const toolResults = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'tool')

describe('dsh run with a child budget', () => {
  it('a child under maxTokens 100, 40 tokens a model call, is stopped at its third call; the parent reads status budget', async () => {
    t.server = await startModelServer((request) => {
      if (lastUser(request) === CHILD_PROMPT) {
        // Every call of the child asks for one more tool call: it would never stop on its own.
        const n = toolResults(request).length
        return callTools([{ id: `k${n}`, name: 'list_agents', arguments: '{}' }], { prompt: 30, completion: 10 })
      }
      if (toolResults(request).length === 0)
        return callTools([
          {
            id: 'c1',
            name: 'subagent',
            arguments: JSON.stringify({ prompt: CHILD_PROMPT, label: 'looper', budget: { maxTokens: 100 } }),
          },
        ])
      return answer(['The looper ran out of budget.'])
    })
    const result = await dsh(['run', 'Delegate the listing.', '--root', t.root, '--base-url', t.server.baseURL, '--model', 'wombat-1'])
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!

    // The child's model calls, counted at the server: 40, 80, 120 tokens — the third crosses 100, and no fourth is sent.
    const childCalls = t.server.requests.filter((request) => lastUser(request) === CHILD_PROMPT)
    expect(childCalls).toHaveLength(3)

    // The parent's tool result says so: status budget, the typed error, the figures.
    const events = await history(id, t.root, env())
    const started = events.find((e) => e.type === 'tool/result')!.data.content as Record<string, unknown>
    const childId = started.id as string
    expect(started).toMatchObject({
      status: 'budget',
      budget: { maxTokens: 100 },
      error: { code: 'SUBAGENT_BUDGET_EXCEEDED' },
      exceeded: { kind: 'tokens', session: childId, limit: 100, spent: 120 },
    })
    // The parent's next request carried it to the model.
    const after = t.server.requests.find((request) => lastUser(request) !== CHILD_PROMPT && toolResults(request).length === 1)!
    expect(String(toolResults(after)[0]!.content)).toContain('budget.\nError SUBAGENT_BUDGET_EXCEEDED')

    // The child's own log: three counted steps, then subagent/end {reason: 'budget'} with the figures.
    const child = await history(childId, t.root, env())
    const counted = child.filter((e) => e.type === 'step/end' && e.data.usage !== undefined)
    expect(counted.map((e) => e.data.usage)).toEqual([
      { input: 30, output: 10 },
      { input: 30, output: 10 },
      { input: 30, output: 10 },
    ])
    expect(child.filter((e) => e.type === 'subagent/end').at(-1)!.data).toMatchObject({
      reason: 'budget',
      exceeded: { kind: 'tokens', limit: 100, spent: 120 },
      spent: { tokens: 120, turns: 1 },
    })
    expect(child.find((e) => e.type === 'subagent/options')!.data).toMatchObject({ maxTokens: 100 })
  })

  it('a child whose answered turn crosses its token or cost budget shows on its progress line as ended on that budget', async () => {
    // One model call of the child: 100 input and 10 output tokens, its answer complete; at $1000 a million tokens, $0.11.
    const budgets = [{ maxTokens: 50 }, { maxCostUsd: 0.05 }]
    t.server = await startModelServer((request) => {
      if (lastUser(request).startsWith('CHILD')) return answer(['child answer'], { prompt: 100, completion: 10 })
      const n = toolResults(request).length
      if (n < budgets.length)
        return callTools([
          { id: `c${n}`, name: 'subagent', arguments: JSON.stringify({ prompt: `CHILD ${n}`, label: `kid${n}`, budget: budgets[n] }) },
        ])
      return answer(['both stopped'])
    })
    const prices = join(t.dir, 'prices.json')
    writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { '127.0.0.1': { 'wombat-1': { input: 1000, output: 1000 } } } }))
    const args = ['run', 'Delegate twice.', '--root', t.root, '--base-url', t.server.baseURL, '--model', 'wombat-1', '--prices', prices]
    const result = await dsh(args)
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const lines = result.stdout.split('\n')
    // The runtime's subagent/end reason, with the budget's figures; the child's turn itself had completed.
    expect(lines).toContain('  [kid0] ended: budget (tokens: 110 spent of 50)')
    expect(lines).toContain('  [kid1] ended: budget (cost: $0.11 spent of $0.05)')
    expect(result.stdout).not.toMatch(/\[kid\d\] (turn )?ended: completed/)
    const kid0 = lines.indexOf('  [kid0] ended: budget (tokens: 110 spent of 50)')
    expect(lines[kid0 - 1]).toBe('  [kid0] answered: child answer')
    expect(lines[kid0 + 1]).toMatch(/^\[tool result\] \S+ \(one-shot "kid0"\) budget\.$/)
  })
})
