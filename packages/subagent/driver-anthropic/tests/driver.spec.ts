import { Context } from '@dsh/context'
import { answer, callTools, type ModelServer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { type SubagentRuntime, type SubagentTool, subagentsPlugin } from '@dsh/subagent'
import { subagentControlTools } from '@dsh/tool-subagent-control'
import { afterEach, describe, expect, it } from 'vitest'
import { createAnthropicDriver } from '../src/index.js'
import { bodyOf, messagesURL, ofType, TEST_KEY } from './helpers.js'

let server: ModelServer | undefined
let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  await server?.close()
  ctx = undefined
  server = undefined
})

/** A real composition (store, projections, memory query, the subagent runtime) whose driver talks to the test server. */
async function runtimeWith(model: ModelServer, tools: (runtime: SubagentRuntime) => readonly SubagentTool[]): Promise<SubagentRuntime> {
  ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions') }))
  const composed = ctx
  const driver = createAnthropicDriver({
    baseURL: messagesURL(model),
    apiKey: TEST_KEY,
    model: 'parent-model',
    env: {},
    retry: { maxAttempts: 1 },
    context: () => composed.get('sessionContext'),
  })
  await ctx.activate(subagentsPlugin({ driver, tools: (_agent, runtime) => tools(runtime) }))
  return ctx.require('subagents')
}

/** The text of the last user message's last text block. */
function lastUserText(request: RecordedRequest): string | undefined {
  const user = bodyOf(request)
    .messages.filter((m) => m.role === 'user')
    .at(-1)
  if (user === undefined) return undefined
  const blocks = typeof user.content === 'string' ? [{ type: 'text', text: user.content }] : user.content
  return blocks.filter((block) => block.type === 'text').at(-1)?.text
}

describe('createAnthropicDriver under the subagent runtime', () => {
  it('with the real control tools: an awaited one-shot child (its own model and instructions) answers the parent', async () => {
    server = await startModelServer((request) => {
      if (lastUserText(request) === 'name a wombat') return answer(['Wilma'], undefined, ['A name.'])
      const results = bodyOf(request)
        .messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content))
        .filter((b) => b.type === 'tool_result')
      if (results.length === 0)
        return callTools([
          {
            id: 'toolu_s1',
            name: 'subagent',
            arguments: JSON.stringify({
              prompt: 'name a wombat',
              label: 'namer',
              model: 'child-model',
              instructions: 'Answer with one name.',
            }),
          },
        ])
      return answer(['It is called Wilma.'])
    })
    const runtime = await runtimeWith(server, (rt) => subagentControlTools(rt))
    const parent = ctx!.require('sessions').create()
    const outcome = await runtime.drive(parent, { prompt: 'Name a wombat via a subagent' }).done

    expect(outcome).toMatchObject({ reason: 'completed', text: 'It is called Wilma.' })
    const child = server.requests.find((request) => lastUserText(request) === 'name a wombat')
    expect(child).toBeDefined()
    expect(child?.protocol).toBe('messages')
    expect(bodyOf(child).model).toBe('child-model')
    expect(bodyOf(child).system).toEqual([{ type: 'text', text: 'Answer with one name.', cache_control: { type: 'ephemeral' } }])
    const last = bodyOf(server.requests.at(-1))
    const texts = JSON.stringify(last.messages)
    expect(texts).toContain('Wilma')
    expect(texts).toContain('[subagent \\"namer\\"')
  })

  it('ends an interrupted child run cancelled, the runtime reason', async () => {
    server = await startModelServer(() => ({ kind: 'stream', content: ['thinking', ' more'], hangAfter: 1 }))
    const runtime = await runtimeWith(server, () => [])
    const parent = ctx!.require('sessions').create()
    const handle = runtime.spawn(parent, { mode: 'continuable', label: 'slow', context: 'fresh', prompt: 'take your time' })
    await server.hung()
    for (let i = 0; i < 10_000 && !handle.session.events.some((event) => event.type === 'assistant/chunk'); i++)
      await new Promise((resolve) => setImmediate(resolve))
    expect(await runtime.interrupt(handle.id)).toBe(true)
    const settled = await handle.done
    expect(settled.reason).toBe('cancelled')
    expect(ofType(handle.session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'cancelled' }])
  })

  it('names the provider and model its steps use by default, which a cost budget is priced by', () => {
    const driver = createAnthropicDriver({ baseURL: 'http://models.example.test', apiKey: TEST_KEY, model: 'parent-model', env: {} })
    expect(driver.model).toEqual({ provider: 'models.example.test', model: 'parent-model' })
  })
})
