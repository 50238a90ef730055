import { Context } from '@dsh/context'
import { type StoredSessionEvent, sessionStorePlugin } from '@dsh/session'
import { applyContextEvent, contextView, renderChat, sessionContextPlugin, sessionContextUnit } from '@dsh/session-context'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { afterEach, describe, expect, it } from 'vitest'
import { runAgent } from '../src/index.js'
import { answer, callTools, type ModelServer, startModelServer } from '../src/testing/model-server.js'
import { addTool, newStore, ofType, testClient } from './helpers.js'

let server: ModelServer | undefined
let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  await server?.close()
  ctx = undefined
  server = undefined
})

/** The Chat messages a fresh full render of the log's first `count` events gives (what each request must equal). */
function freshRender(events: readonly StoredSessionEvent[], count: number): unknown[] {
  let state = sessionContextUnit.init()
  for (const event of events.slice(0, count)) state = applyContextEvent(state, event)
  return renderChat(contextView(state), { reasoningContent: true }).body.messages
}

const STEPS = 6
const steps = [
  ...Array.from({ length: STEPS - 1 }, (_, i) => callTools([{ id: `a${i}`, name: 'add', arguments: `{"a":${i},"b":1}` }])),
  answer(['done']),
]

describe('requests built from the session context', () => {
  it('takes the context from the sessionContext service, one live read per step, and every request equals a fresh full render of the log before it', async () => {
    server = await startModelServer(steps)
    const { client } = testClient(server.baseURL)
    ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await ctx.activate(sessionContextPlugin())
    const service = ctx.require('sessionContext')
    const session = ctx.require('sessions').create()
    const outcome = await runAgent({
      client,
      session,
      prompt: 'count up',
      tools: [addTool],
      context: service,
      signal: new AbortController().signal,
    })
    expect(outcome.reason).toBe('completed')
    expect(service.metrics).toMatchObject({ live: STEPS, rangeReads: 0, eventsRead: 0 })
    // Each request is built before its step/start: the context of the log up to there.
    const starts = session.events.flatMap((event, i) => (event.type === 'step/start' ? [i] : []))
    expect(starts).toHaveLength(STEPS)
    for (const [n, at] of starts.entries()) expect(server!.requests[n]!.body.messages).toEqual(freshRender(session.events, at))
    expect(server.requests.at(-1)!.body.messages).toHaveLength(1 + 2 * (STEPS - 1))
  })

  it('without a service, folds the unit itself across turns and still matches a fresh full render', async () => {
    server = await startModelServer([...steps, answer(['again'])])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    await runAgent({ client, session, prompt: 'count up', tools: [addTool], signal: new AbortController().signal })
    await runAgent({ client, session, prompt: 'once more', tools: [addTool], signal: new AbortController().signal })
    const starts = session.events.flatMap((event, i) => (event.type === 'step/start' ? [i] : []))
    expect(starts).toHaveLength(STEPS + 1)
    for (const [n, at] of starts.entries()) expect(server!.requests[n]!.body.messages).toEqual(freshRender(session.events, at))
  })

  it('records each step: step/start {model, provider} before the call, step/end with its own usage, finish and response id after its output', async () => {
    server = await startModelServer([
      {
        kind: 'stream',
        toolCalls: [{ id: 'x', name: 'add', arguments: '{"a":1,"b":2}' }],
        usage: { prompt: 10, completion: 4, cached: 6 },
      },
      { kind: 'stream', content: ['cut'], finish: 'length', usage: { prompt: 20, completion: 9, reasoning: 3 } },
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    await runAgent({ client, session, prompt: 'p', tools: [addTool], model: 'other-model', signal: new AbortController().signal })
    expect(session.events.map((event) => event.type)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'tool/call',
      'step/end',
      'tool/result',
      'step/start',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ])
    expect(ofType(session.events, 'step/start')).toEqual([
      { model: 'other-model', provider: '127.0.0.1' },
      { model: 'other-model', provider: '127.0.0.1' },
    ])
    expect(ofType(session.events, 'step/end')).toEqual([
      { usage: { input: 4, output: 4, cacheRead: 6 }, finish: 'tool-calls', responseId: 'chatcmpl-test' },
      { usage: { input: 20, output: 6, reasoning: 3 }, finish: 'max-tokens', responseId: 'chatcmpl-test' },
    ])
    // The turn's sum stays on assistant/message (what session stats count); step/end holds each step's own.
    expect(ofType(session.events, 'assistant/message')).toMatchObject([{ usage: { input: 24, output: 10, cacheRead: 6, reasoning: 3 } }])
  })
})
