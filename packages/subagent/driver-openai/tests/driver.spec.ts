import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { type SubagentRuntime, type SubagentTool, subagentsPlugin } from '@dsh/subagent'
import { createListAgentsTool, subagentControlTools } from '@dsh/tool-subagent-control'
import { afterEach, describe, expect, it } from 'vitest'
import { createOpenAIDriver } from '../src/driver.js'
import { answer, callTools, type ModelServer, type RecordedRequest, startModelServer } from '../src/testing/model-server.js'
import { systemPrompt } from '../src/turn-loop.js'
import { ofType, TEST_KEY } from './helpers.js'

let server: ModelServer | undefined
let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  await server?.close()
  ctx = undefined
  server = undefined
})

/** A real composition (store, projections, memory query, the subagent runtime) whose driver talks to the test server. */
async function runtimeWith(baseURL: string, tools: (runtime: SubagentRuntime) => SubagentTool[]): Promise<SubagentRuntime> {
  ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions') }))
  const composed = ctx
  const driver = createOpenAIDriver({
    baseURL,
    apiKey: TEST_KEY,
    model: 'parent-model',
    env: {},
    retry: { maxAttempts: 1 },
    // As a host does: the service is looked up when a run builds a request.
    context: () => composed.get('sessionContext'),
  })
  await ctx.activate(subagentsPlugin({ driver, tools: (_agent, runtime) => tools(runtime) }))
  return ctx.require('subagents')
}

const lastUser = (request: RecordedRequest): string | null | undefined =>
  request.body.messages.filter((m) => m.role === 'user').at(-1)?.content

describe('createOpenAIDriver under the subagent runtime', () => {
  it('drives a parent whose model spawns a continuable child (run by the same driver with its model and instructions) and lists it', async () => {
    let parentSteps = 0
    server = await startModelServer((request) => {
      if (lastUser(request) === 'count the wombats') return answer(['There are ', '3 wombats.'], { prompt: 5, completion: 4 })
      parentSteps++
      if (parentSteps === 1) return callTools([{ id: 'p1', name: 'delegate', arguments: '{"task":"count the wombats"}' }])
      if (parentSteps === 2) return callTools([{ id: 'p2', name: 'list_agents', arguments: '{}' }])
      return answer(['Done: 3 wombats.'])
    })
    const runtime = await runtimeWith(server.baseURL, (rt) => [
      createListAgentsTool(rt),
      {
        name: 'delegate',
        description: 'Delegate a task to a continuable child and wait for its first answer.',
        jsonSchema: { type: 'object', properties: { task: { type: 'string' } }, required: ['task'] },
        async execute(input, { agent }) {
          // Continuable: the model's list_agents lists only children send_message can reach.
          const handle = rt.spawn(agent, {
            mode: 'continuable',
            label: 'counter',
            context: 'fresh',
            prompt: (input as { task: string }).task,
            settings: { model: 'child-model', instructions: 'Count carefully.' },
          })
          const outcome = await handle.done
          return { text: outcome.text ?? '(no answer)', child: handle.id }
        },
      },
    ])
    const sessions = ctx!.require('sessions')
    const parent = sessions.create()
    const outcome = await runtime.drive(parent, { prompt: 'How many wombats?' }).done

    expect(outcome.reason).toBe('completed')
    expect(outcome.text).toBe('Done: 3 wombats.')
    const [delegated, listed] = ofType(parent.events, 'tool/result') as { content: { text: string; child?: string } }[]
    expect(delegated!.content.text).toBe('There are 3 wombats.')
    // Without persistence the settled child stays loaded between turns: idle.
    expect(listed!.content.text).toBe(`${delegated!.content.child} [idle] — counter`)

    const childRequest = server.requests.find((request) => lastUser(request) === 'count the wombats')!
    expect(childRequest.body.model).toBe('child-model')
    expect(childRequest.body.messages[0]).toEqual({ role: 'system', content: 'Count carefully.' })
    expect(childRequest.body.tools?.map((tool) => tool.function.name).sort()).toEqual(['delegate', 'list_agents'])
    const child = await ctx!.require('sessionQuery').readHistory(delegated!.content.child!)
    expect(child.events.filter((event) => event.type === 'assistant/message').map((event) => event.data)).toEqual([
      {
        turn: 1,
        text: 'There are 3 wombats.',
        usage: { input: 5, output: 4, cacheRead: 0, reasoning: 0 },
        provider: '127.0.0.1',
        model: 'child-model',
      },
    ])
    // The parent's next request read its child's settlement notice as input.
    expect(
      server.requests.at(-1)!.body.messages.some((m) => m.role === 'user' && String(m.content).startsWith('[subagent "counter"')),
    ).toBe(true)
  })

  it('with the real control tools: an awaited one-shot child answers the parent, whose next request has the result and then the notice', async () => {
    server = await startModelServer((request) => {
      if (lastUser(request) === 'name a wombat') return answer(['Wilma'])
      const step = request.body.messages.filter((m) => m.role === 'tool').length
      if (step === 0) return callTools([{ id: 's1', name: 'subagent', arguments: '{"prompt":"name a wombat","label":"namer"}' }])
      return answer(['It is called Wilma.'])
    })
    const runtime = await runtimeWith(server.baseURL, (rt) => subagentControlTools(rt))
    const parent = ctx!.require('sessions').create()
    const outcome = await runtime.drive(parent, { prompt: 'Name a wombat via a subagent' }).done
    expect(outcome.text).toBe('It is called Wilma.')
    // The premise: the child's settlement notice landed between the parent's call and its result.
    expect(parent.events.map((event) => event.type).filter((type) => type.startsWith('tool/') || type === 'subagent/notice')).toEqual([
      'tool/call',
      'subagent/notice',
      'tool/result',
    ])
    const last = server.requests.at(-1)!.body.messages
    const tool = last.findIndex((m) => m.role === 'tool')
    expect(last[tool]!.content).toMatch(/one-shot "namer"\) completed\.\nResult:\nWilma$/)
    expect(last[tool + 1]).toMatchObject({
      role: 'user',
      content: expect.stringMatching(/^\[subagent "namer" \(.+\) settled: completed\]\nWilma$/),
    })
  })

  it('ends an interrupted child run cancelled, the runtime reason', async () => {
    server = await startModelServer(() => ({ kind: 'stream', content: ['thinking', ' more'], hangAfter: 1 }))
    const runtime = await runtimeWith(server.baseURL, () => [])
    const parent = ctx!.require('sessions').create()
    const handle = runtime.spawn(parent, { mode: 'continuable', label: 'slow', context: 'fresh', prompt: 'take your time' })
    await server.hung()
    while (!handle.session.events.some((event) => event.type === 'assistant/chunk')) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(await runtime.interrupt(handle.id)).toBe(true)
    const settled = await handle.done
    expect(settled.reason).toBe('cancelled')
    expect(ofType(handle.session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'cancelled' }])
  })

  it('names the provider and model its steps use by default, which a cost budget is priced by', () => {
    const driver = createOpenAIDriver({ baseURL: 'http://models.example.test/v1', apiKey: TEST_KEY, model: 'parent-model', env: {} })
    expect(driver.model).toEqual({ provider: 'models.example.test', model: 'parent-model' })
  })

  it('composes the system prompt from the driver, persona, instructions and output contract', () => {
    expect(systemPrompt(undefined, undefined)).toBeUndefined()
    expect(
      systemPrompt('Be terse.', {
        persona: 'You are a reviewer.',
        outputSchema: { type: 'object' },
      }),
    ).toBe(
      'Be terse.\n\nYou are a reviewer.\n\nYour final answer must be a single JSON value (no prose, no code fence) valid against this JSON Schema:\n{"type":"object"}',
    )
  })
})
