import type { Context } from '@dsh/context'
import type { Session } from '@dsh/session'
import { createScriptedDriver, type ScriptStep, type SubagentRun, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import { type SubagentControlTool, type SubagentToolResult, subagentControlTools } from '../src/index.js'
import { storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/** `n` model calls of `tokens` input tokens each, then an answer. */
function steps(n: number, tokens: number): ScriptStep[] {
  return [
    ...Array.from({ length: n }, (): ScriptStep => ({ kind: 'step', usage: { input: tokens, output: 0 } })),
    { kind: 'message', text: 'done' },
  ]
}

/** A real host whose scripted children run the script their label names (default: ten steps of 30 tokens). */
async function host(scripts: Record<string, ScriptStep[]> = {}): Promise<{ parent: Session; subagent: SubagentControlTool }> {
  ctx = await storeContext()
  const script = (run: SubagentRun): ScriptStep[] => scripts[run.identity?.label ?? ''] ?? steps(10, 30)
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver(script), tools: (_agent, runtime) => subagentControlTools(runtime) }))
  const tools = subagentControlTools(ctx.require('subagents'))
  return { parent: ctx.require('sessions').create({ id: 'parent' }), subagent: tools.find((tool) => tool.name === 'subagent')! }
}

describe('subagent { budget }', () => {
  it('runs the child under the budget; a budget stop is the result status, with the typed error and the figures', async () => {
    const { parent, subagent } = await host()
    const result = (await subagent.execute(
      { prompt: 'count', label: 'counter', budget: { maxTokens: 50 } },
      { agent: parent },
    )) as SubagentToolResult
    expect(result).toMatchObject({
      status: 'budget',
      budget: { maxTokens: 50 },
      error: { code: 'SUBAGENT_BUDGET_EXCEEDED' },
      exceeded: { kind: 'tokens', session: result.id, limit: 50, spent: 60 },
    })
    expect(result.text).toBe(
      `${result.id} (one-shot "counter") budget.\nError SUBAGENT_BUDGET_EXCEEDED: Stopped: the tokens budget of '${result.id}' (50 tokens) was used up (60 tokens spent).`,
    )
  })

  it("lowers a request above the caller's remainder to it, and says so in the result", async () => {
    const { parent, subagent } = await host({
      // The budgeted caller spends 30 tokens, then starts a child asking for more than it has left.
      caller: [
        { kind: 'step', usage: { input: 30, output: 0 } },
        {
          kind: 'call',
          name: 'subagent',
          arguments: { prompt: 'help', label: 'helper', wait: false, budget: { maxTokens: 1_000, maxTurns: 3 } },
        },
        { kind: 'message', text: 'delegated' },
      ],
      helper: steps(1, 5),
    })
    const caller = (await subagent.execute(
      { prompt: 'go', label: 'caller', budget: { maxTokens: 100 } },
      { agent: parent },
    )) as SubagentToolResult
    expect(caller.status).toBe('completed')
    // What the caller's model read: the tool result in the caller's log.
    const callerLog = (await ctx!.require('sessionQuery').observeSession(caller.id)).events
    const started = (callerLog.find((event) => event.type === 'tool/result')!.data as unknown as { content: SubagentToolResult }).content
    expect(started).toMatchObject({ status: 'running', budget: { maxTokens: 70, maxTurns: 3 } })
    expect(started.text).toContain('\nBudget: maxTokens 70, maxTurns 3.')
  })

  it.each([
    ['a zero figure', { maxTokens: 0 }, 'budget.maxTokens'],
    ['a fraction of a token', { maxTokens: 1.5 }, 'budget.maxTokens'],
    ['a negative cost', { maxCostUsd: -1 }, 'budget.maxCostUsd'],
    ['an unknown key', { maxSteps: 3 }, 'budget'],
  ])('rejects %s as invalid input', async (_name, budget, fragment) => {
    const { parent, subagent } = await host()
    const error = await subagent.execute({ prompt: 'p', budget }, { agent: parent }).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message?: string },
    )
    expect(error?.code).toBe('TOOL_SUBAGENT_CONTROL_INVALID_INPUT')
    expect(error?.message).toContain(fragment)
  })

  it('passes a cost budget the runtime cannot price through as its typed refusal', async () => {
    const { parent, subagent } = await host()
    const error = await subagent.execute({ prompt: 'p', budget: { maxCostUsd: 1 } }, { agent: parent }).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    )
    expect(error?.code).toBe('SUBAGENT_BUDGET_UNPRICED')
  })
})

describe('send_message to a child with no turn left', () => {
  it('is refused with SUBAGENT_BUDGET_EXCEEDED, stating the budget and what was spent, in both dialects; nothing reaches the child', async () => {
    ctx = await storeContext()
    await ctx.activate(subagentsPlugin({ driver: createScriptedDriver(() => [{ kind: 'message', text: 'ok' }]) }))
    const runtime = ctx.require('subagents')
    const parent = ctx.require('sessions').create({ id: 'parent' })
    const child = runtime.spawn(parent, { mode: 'continuable', label: 'kid', context: 'fresh', prompt: 'a', settings: { maxTurns: 2 } })
    await child.done
    const [dshSend] = subagentControlTools(runtime, { filter: ['send_message'] })
    const [harnessSend] = subagentControlTools(runtime, { dialect: 'harness', filter: ['send_message'] })
    expect(await dshSend!.execute({ id: child.id, message: 'CC second' }, { agent: parent })).toMatchObject({ status: 'started' })
    await runtime.wait([child.id], { caller: parent })
    const log = async () => (await ctx!.require('sessionQuery').observeSession(child.id)).events
    const before = await log()
    for (const [tool, input] of [
      [dshSend!, { id: child.id, message: 'CC third' }],
      [harnessSend!, { subagent_id: child.id, message: 'CC third' }],
    ] as const) {
      const error = await tool.execute(input, { agent: parent }).then(
        () => undefined,
        (e: unknown) => e as { code?: string; message?: string; details?: unknown },
      )
      expect(error?.code).toBe('SUBAGENT_BUDGET_EXCEEDED')
      expect(error?.details).toEqual({ kind: 'turns', session: child.id, limit: 2, spent: 2 })
      expect(error?.message).toContain('its turns budget (2 turns) is used up (2 turns spent). Nothing was sent')
    }
    expect(await log()).toEqual(before)
  })
})
