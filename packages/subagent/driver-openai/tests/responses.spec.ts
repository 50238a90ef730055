import { compactionPlugin } from '@dsh/compaction'
import { Context } from '@dsh/context'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { renderResponses, sessionContextPlugin } from '@dsh/session-context'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createOpenAISummarizer, type ModelClient, runAgent } from '../src/index.js'
import {
  answer,
  callTools,
  type ModelServer,
  type RecordedRequest,
  type Reply,
  type ReportedUsage,
  type ResponsesRequestBody,
  startModelServer,
} from '../src/testing/model-server.js'
import { usageFromResponses } from '../src/usage.js'
import { addTool, newStore, ofType, testClient } from './helpers.js'

const bodyOf = (request: RecordedRequest): ResponsesRequestBody => request.body as unknown as ResponsesRequestBody
const itemsOf = (request: RecordedRequest): readonly Record<string, unknown>[] => {
  const input = bodyOf(request).input
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input
}
const lastUserText = (request: RecordedRequest): string => {
  const message = request.body.messages?.filter((m) => m.role === 'user').at(-1)
  return String(message?.content ?? '')
}

/** The model of these tests: on Responses, a tool call on the first request of each prompt, then an answer; on Chat, the summarizer. */
function responder(request: RecordedRequest): Reply {
  if (request.protocol === 'chat') {
    return /^Summarize the conversation above/.test(lastUserText(request))
      ? answer(['Summary: the user added numbers.'])
      : answer(['chat answer'])
  }
  const items = itemsOf(request)
  const last = items.at(-1)
  if (last?.type === 'function_call_output') return answer(['The sum ', 'is 5.'], undefined, ['adding'])
  return callTools([{ id: `call_${Math.random().toString(36).slice(2, 8)}`, name: 'add', arguments: '{"a":2,"b":3}' }])
}

async function setup(): Promise<{ server: ModelServer; ctx: Context; client: ModelClient; session: Session }> {
  const server = await startModelServer(responder)
  onTestFinished(() => server.close())
  const ctx = new Context()
  onTestFinished(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  const { client } = testClient(server.baseURL, { api: 'responses' })
  const { client: chat } = testClient(server.baseURL)
  ctx.provide('summarizer', createOpenAISummarizer({ client: chat }))
  await ctx.activate(compactionPlugin())
  return { server, ctx, client, session: ctx.require('sessions').create() }
}

async function turn(
  client: ModelClient,
  ctx: Context,
  session: Session,
  prompt: string,
  extra: { model?: string; system?: string } = {},
): Promise<void> {
  const outcome = await runAgent({
    client,
    session,
    prompt,
    tools: [addTool],
    signal: new AbortController().signal,
    context: ctx.require('sessionContext'),
    ...extra,
  })
  expect(outcome.reason).toBe('completed')
}

describe('runAgent over the Responses API', () => {
  it('after the first request only new input items go out, each continuing the previous response; ids, usage and events are recorded', async () => {
    const { server, ctx, client, session } = await setup()
    await turn(client, ctx, session, 'Add 2 and 3.', { system: 'You add numbers.' })
    await turn(client, ctx, session, 'Again, please.', { system: 'You add numbers.' })

    const requests = server.requests.filter((request) => request.protocol === 'responses')
    expect(requests).toHaveLength(4)
    // The input items counted at the server: the prompt, then only what is new each time.
    expect(requests.map((request) => itemsOf(request).map((item) => item.type))).toEqual([
      ['message'],
      ['function_call_output'],
      ['message'],
      ['function_call_output'],
    ])
    // The whole context by now is 8 items: 2 prompts, 2 calls, 2 results, 2 answers.
    const whole = renderResponses(await ctx.require('sessionContext').contextOf(session))
    expect(whole.body.input).toHaveLength(8)
    // Each continues the response before it; the system prompt goes as instructions every time.
    const ends = ofType(session.events, 'step/end') as { responseId?: string; usage?: unknown; finish?: string }[]
    expect(ends.map((end) => end.finish)).toEqual(['tool-calls', 'stop', 'tool-calls', 'stop'])
    expect(requests.map((request) => bodyOf(request).previous_response_id)).toEqual([
      undefined,
      ends[0]!.responseId,
      ends[1]!.responseId,
      ends[2]!.responseId,
    ])
    expect(requests.every((request) => bodyOf(request).instructions === 'You add numbers.')).toBe(true)
    expect(requests.every((request) => bodyOf(request).tools?.[0]?.name === 'add')).toBe(true)
    expect(new Set(ends.map((end) => end.responseId)).size).toBe(4)
    // Usage: each step's own, mapped from what the server reported for it.
    const reported = server.reported.filter((report) => report.protocol === 'responses') as unknown as ReportedUsage<unknown>[]
    expect(ends.map((end) => end.usage)).toEqual(
      reported.map((report) => {
        const usage = usageFromResponses(report.usage)
        return {
          input: usage.input,
          output: usage.output,
          ...(usage.cacheRead === 0 ? {} : { cacheRead: usage.cacheRead }),
          ...(usage.reasoning === 0 ? {} : { reasoning: usage.reasoning }),
        }
      }),
    )
    expect(ofType(session.events, 'step/start')).toEqual(
      Array.from({ length: 4 }, () => ({ model: 'test-model', provider: '127.0.0.1', api: 'responses' })),
    )
    expect(ofType(session.events, 'assistant/reasoning').map((r) => (r as { delta: string }).delta)).toEqual(['adding', 'adding'])
    expect(ofType(session.events, 'tool/result').map((r) => (r as { content: unknown }).content)).toEqual([
      { text: '5', sum: 5 },
      { text: '5', sum: 5 },
    ])
    expect((ofType(session.events, 'assistant/message').at(-1) as { text: string }).text).toBe('The sum is 5.')
  })

  it('a compaction starts a new chain: the next request sends the compacted context whole, without previous_response_id', async () => {
    const { server, ctx, client, session } = await setup()
    await turn(client, ctx, session, 'Add 2 and 3.')
    await ctx.require('compaction').compact(session, { reason: 'manual', keep: 1 })
    const before = server.requests.length
    await turn(client, ctx, session, 'Again, please.')
    const next = server.requests.slice(before).filter((request) => request.protocol === 'responses')
    expect(bodyOf(next[0]!).previous_response_id).toBeUndefined()
    const text = JSON.stringify(itemsOf(next[0]!))
    expect(text).toContain('Summary: the user added numbers.')
    expect(text).toContain('Again, please.')
    // The new chain continues as before after its first request.
    expect(bodyOf(next[1]!).previous_response_id).toBe((ofType(session.events, 'step/end').at(-2) as { responseId: string }).responseId)
    expect(itemsOf(next[1]!).map((item) => item.type)).toEqual(['function_call_output'])
  })

  it('a fork starts a new chain: its first request sends the inherited context whole, without its parent’s response id', async () => {
    const { server, ctx, client, session } = await setup()
    await turn(client, ctx, session, 'Add 2 and 3.')
    const child = ctx.require('sessions').fork(session)
    const before = server.requests.length
    await turn(client, ctx, child, 'And in the fork?')
    const first = server.requests[before]!
    expect(bodyOf(first).previous_response_id).toBeUndefined()
    expect(itemsOf(first).map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output', 'message', 'message'])
    expect(bodyOf(server.requests[before + 1]!).previous_response_id).toBe(
      (child.ownEvents().find((event) => event.type === 'step/end')!.data as { responseId: string }).responseId,
    )
  })

  it('a resume with another model or another provider starts a new chain; the same model and provider continue it', async () => {
    const { server, ctx, client, session } = await setup()
    await turn(client, ctx, session, 'Add 2 and 3.')
    const firstOf = (from: number) => server.requests.slice(from).find((request) => request.protocol === 'responses')!

    let before = server.requests.length
    await turn(client, ctx, session, 'Another model?', { model: 'other-model' })
    expect(bodyOf(firstOf(before)).previous_response_id).toBeUndefined()
    expect(bodyOf(firstOf(before)).model).toBe('other-model')

    // The same server under another host name is another provider.
    const { client: elsewhere } = testClient(server.baseURL.replace('127.0.0.1', 'localhost'), { api: 'responses', model: 'other-model' })
    before = server.requests.length
    await turn(elsewhere, ctx, session, 'Another provider?')
    expect(bodyOf(firstOf(before)).previous_response_id).toBeUndefined()
    expect(ofType(session.events, 'step/start').at(-1)).toEqual({ model: 'other-model', provider: 'localhost', api: 'responses' })

    before = server.requests.length
    await turn(elsewhere, ctx, session, 'Same again?')
    expect(bodyOf(firstOf(before)).previous_response_id).toBe(
      (ofType(session.events, 'step/end').at(-3) as { responseId: string }).responseId,
    )
    expect(itemsOf(firstOf(before)).map((item) => item.type)).toEqual(['message'])
  })

  it('a step that continued a Chat Completions response starts a new chain (a chat id is never a previous_response_id)', async () => {
    const { server, ctx, client, session } = await setup()
    const { client: chat } = testClient(server.baseURL)
    const outcome = await runAgent({
      client: chat,
      session,
      prompt: 'Hello on chat.',
      tools: [],
      signal: new AbortController().signal,
      context: ctx.require('sessionContext'),
    })
    expect(outcome.reason).toBe('completed')
    expect(ofType(session.events, 'step/end').at(-1)).toMatchObject({ responseId: 'chatcmpl-test' })
    await turn(client, ctx, session, 'Now on Responses.')
    const first = server.requests.find((request) => request.protocol === 'responses')!
    expect(bodyOf(first).previous_response_id).toBeUndefined()
    expect(itemsOf(first).map((item) => item.type)).toEqual(['message', 'message', 'message'])
  })

  it('api must be chat or responses (DRIVER_OPENAI_INVALID_OPTIONS)', () => {
    expect(() => testClient('http://127.0.0.1:9/v1', { api: 'completions' as never })).toThrow(
      expect.objectContaining({ code: 'DRIVER_OPENAI_INVALID_OPTIONS' }),
    )
  })
})

describe('Responses stream endings', () => {
  it('response.incomplete for max_output_tokens ends the step max-tokens; response.failed is DRIVER_OPENAI_REQUEST_FAILED and the next request starts a new chain', async () => {
    const server = await startModelServer([
      { kind: 'stream', content: ['Cut o'], finish: 'max_output_tokens' },
      { kind: 'stream', content: ['Half'], finish: 'failed' },
      answer(['Whole.']),
    ])
    onTestFinished(() => server.close())
    const { client } = testClient(server.baseURL, { api: 'responses' })
    const session = newStore().create()
    const run = (prompt: string) => runAgent({ client, session, prompt, tools: [], signal: new AbortController().signal })
    expect((await run('One.')).reason).toBe('completed')
    const failed = await run('Two.')
    expect(failed.reason).toBe('error')
    expect(failed.error).toMatchObject({ code: 'DRIVER_OPENAI_REQUEST_FAILED' })
    expect(String((failed.error as Error).message)).toContain('The model failed to finish the response.')
    expect((await run('Three.')).reason).toBe('completed')
    expect(ofType(session.events, 'step/end').map((end) => (end as { finish: string }).finish)).toEqual(['max-tokens', 'error', 'stop'])
    const previous = server.requests.map((request) => bodyOf(request).previous_response_id ?? null)
    // The max-tokens step continues; after the failed step the whole context goes out anew.
    expect(previous[1]).toBe((ofType(session.events, 'step/end')[0] as { responseId: string }).responseId)
    expect(previous[2]).toBeNull()
    expect(itemsOf(server.requests[2]!).length).toBeGreaterThan(2)
  })
})
