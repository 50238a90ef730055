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
})
