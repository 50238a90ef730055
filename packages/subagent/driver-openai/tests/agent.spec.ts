import { MISSING_RESULT_TEXT } from '@dsh/session-context'
import { afterEach, describe, expect, it } from 'vitest'
import { DriverOpenAIError, runAgent, TOOL_RESULT_MAX_BYTES } from '../src/index.js'
import { answer, callTools, type ModelServer, startModelServer } from '../src/testing/model-server.js'
import { addTool, newStore, ofType, TEST_KEY, testClient, types } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

describe('runAgent over a Chat Completions server', () => {
  it('streams deltas as assistant/chunk, reasoning as assistant/reasoning, and ends with assistant/message carrying usage', async () => {
    server = await startModelServer([
      answer(['Hel', 'lo, ', 'world'], { prompt: 12, completion: 5, cached: 4, reasoning: 2 }, ['think', 'ing']),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'Say hello', tools: [], signal: new AbortController().signal })

    expect(outcome).toEqual({ reason: 'completed', text: 'Hello, world' })
    expect(types(session)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'assistant/reasoning',
      'assistant/reasoning',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ])
    // The step's frame: who was called, then its own disjoint usage and why it stopped.
    expect(ofType(session.events, 'step/start')).toEqual([{ model: 'test-model', provider: '127.0.0.1' }])
    expect(ofType(session.events, 'step/end')).toEqual([
      { usage: { input: 8, output: 3, cacheRead: 4, reasoning: 2 }, finish: 'stop', responseId: 'chatcmpl-test' },
    ])
    expect(ofType(session.events, 'assistant/chunk')).toEqual([
      { turn: 1, index: 0, delta: 'Hel' },
      { turn: 1, index: 1, delta: 'lo, ' },
      { turn: 1, index: 2, delta: 'world' },
    ])
    expect(ofType(session.events, 'assistant/reasoning')).toEqual([
      { turn: 1, index: 0, delta: 'think' },
      { turn: 1, index: 1, delta: 'ing' },
    ])
    // The provider's overlapping counts (12 prompt incl. 4 cached; 5 completion incl. 2 reasoning) stored disjoint.
    expect(ofType(session.events, 'assistant/message')).toEqual([
      {
        turn: 1,
        text: 'Hello, world',
        usage: { input: 8, output: 3, cacheRead: 4, reasoning: 2 },
        provider: '127.0.0.1',
        model: 'test-model',
      },
    ])
    expect(server.reported).toEqual([
      {
        request: 0,
        protocol: 'chat',
        model: 'test-model',
        usage: {
          prompt_tokens: 12,
          completion_tokens: 5,
          total_tokens: 17,
          prompt_tokens_details: { cached_tokens: 4 },
          completion_tokens_details: { reasoning_tokens: 2 },
        },
      },
    ])
    expect(ofType(session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'completed' }])

    const [request] = server.requests
    expect(request!.headers.authorization).toBe(`Bearer ${TEST_KEY}`)
    expect(request!.body).toMatchObject({ model: 'test-model', stream: true, stream_options: { include_usage: true } })
    expect(request!.body.messages).toEqual([{ role: 'user', content: 'Say hello' }])
    expect(request!.body.tools).toBeUndefined()
  })

  it('runs a tool call round trip: tool/call, tool/result, and the next request carries both', async () => {
    server = await startModelServer([
      callTools(
        [
          { id: 'call_a', name: 'add', arguments: '{"a": 2, "b": 40}' },
          { id: 'call_b', name: 'nope', arguments: '{}' },
        ],
        { prompt: 10, completion: 3 },
      ),
      answer(['The sum is 42.'], { prompt: 30, completion: 4 }),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'Add 2 and 40', tools: [addTool], signal: new AbortController().signal })

    expect(outcome.reason).toBe('completed')
    expect(ofType(session.events, 'tool/call')).toEqual([
      { turn: 1, callId: 'call_a', name: 'add', arguments: { a: 2, b: 40 } },
      { turn: 1, callId: 'call_b', name: 'nope', arguments: {} },
    ])
    const results = ofType(session.events, 'tool/result') as { callId: string; content: { code?: string }; isError?: boolean }[]
    expect(results[0]).toEqual({ turn: 1, callId: 'call_a', content: { text: '42', sum: 42 } })
    expect(results[1]).toMatchObject({ turn: 1, callId: 'call_b', isError: true, content: { code: 'TOOL_UNKNOWN' } })
    // Usage is summed over the turn's steps.
    expect(ofType(session.events, 'assistant/message')).toEqual([
      {
        turn: 1,
        text: 'The sum is 42.',
        usage: { input: 40, output: 7, cacheRead: 0, reasoning: 0 },
        provider: '127.0.0.1',
        model: 'test-model',
      },
    ])

    // The tools went out as function definitions, without the JSON Schema dialect key.
    expect(server.requests[0]!.body.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'add',
          description: 'Add two numbers a and b.',
          parameters: {
            type: 'object',
            properties: { a: { type: 'number' }, b: { type: 'number' } },
            required: ['a', 'b'],
            additionalProperties: false,
          },
        },
      },
    ])
    const second = server.requests[1]!.body.messages
    expect(second[1]).toMatchObject({
      role: 'assistant',
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'add', arguments: '{"a":2,"b":40}' } },
        { id: 'call_b', type: 'function', function: { name: 'nope', arguments: '{}' } },
      ],
    })
    expect(second[2]).toEqual({ role: 'tool', tool_call_id: 'call_a', content: '42' })
    expect(second[3]).toMatchObject({ role: 'tool', tool_call_id: 'call_b' })
    expect(second[3]!.content).toMatch(/^Error TOOL_UNKNOWN: There is no tool named "nope"\. Available tools: add\.$/)
  })

  it('retries a 429 after the backoff (told the retry-after) and records no delta twice', async () => {
    server = await startModelServer([
      { kind: 'error', status: 429, message: 'Rate limit reached', type: 'rate_limit_error', headers: { 'retry-after': '2' } },
      { kind: 'error', status: 503, message: 'overloaded', type: 'server_error' },
      answer(['ok'], { prompt: 1, completion: 1 }),
    ])
    const { client, waits } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'hi', tools: [], signal: new AbortController().signal })
    expect(outcome).toEqual({ reason: 'completed', text: 'ok' })
    expect(waits).toEqual([
      { attempt: 1, retryAfterMs: 2000 },
      { attempt: 2, retryAfterMs: undefined },
    ])
    expect(server.requests).toHaveLength(3)
    // The retries are inside one step: one frame around them.
    expect(types(session)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ])
  })

  it('gives up after the bounded attempts with a typed error recorded in the turn', async () => {
    server = await startModelServer(() => ({ kind: 'error', status: 500, message: 'boom', type: 'server_error' }))
    const { client, waits } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'hi', tools: [], signal: new AbortController().signal })
    expect(outcome.reason).toBe('error')
    expect(outcome.error).toBeInstanceOf(DriverOpenAIError)
    expect((outcome.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_UNAVAILABLE')
    expect((outcome.error as DriverOpenAIError).message).toBe('The model server failed after 3 attempts (HTTP 500): boom')
    expect(server.requests).toHaveLength(3)
    expect(waits.map((wait) => wait.attempt)).toEqual([1, 2])
  })

  it('turns a 400 into a typed error in the turn, not retried, with every earlier event kept', async () => {
    server = await startModelServer([
      answer(['first answer'], { prompt: 3, completion: 2 }),
      { kind: 'error', status: 400, message: "This model's maximum context length is 8 tokens", type: 'invalid_request_error' },
    ])
    const { client, waits } = testClient(server.baseURL)
    const session = newStore().create()
    await runAgent({ client, session, prompt: 'one', tools: [], signal: new AbortController().signal })
    const before = session.events.slice()
    const outcome = await runAgent({ client, session, prompt: 'two', tools: [], signal: new AbortController().signal })

    expect(outcome.reason).toBe('error')
    expect((outcome.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_BAD_REQUEST')
    expect(waits).toEqual([])
    expect(server.requests).toHaveLength(2)
    // Nothing earlier was touched; the failed turn is recorded and closed.
    expect(session.events.slice(0, before.length)).toEqual(before)
    expect(session.events.slice(before.length).map((event) => [event.type, event.data])).toEqual([
      ['user/message', { text: 'two' }],
      ['turn/start', { turn: 2 }],
      ['step/start', { model: 'test-model', provider: '127.0.0.1' }],
      ['step/end', { finish: 'error' }],
      [
        'assistant/error',
        {
          turn: 2,
          code: 'DRIVER_OPENAI_BAD_REQUEST',
          message: "The model server rejected the request (HTTP 400): This model's maximum context length is 8 tokens",
        },
      ],
      ['turn/end', { turn: 2, reason: 'error' }],
    ])
    expect(session.openTurnBefore()).toBeUndefined()
  })

  it('ends an aborted turn interrupted, keeps the streamed chunks, and the next turn sees them', async () => {
    server = await startModelServer([{ kind: 'stream', content: ['partial ', 'answer', ' never sent'], hangAfter: 2 }, answer(['resumed'])])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const controller = new AbortController()
    const running = runAgent({ client, session, prompt: 'long task', tools: [], signal: controller.signal })
    await server.hung()
    // Both pieces written before the hang arrive before we abort.
    while (ofType(session.events, 'assistant/chunk').length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    const outcome = await running

    expect(outcome.reason).toBe('interrupted')
    expect(types(session)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'assistant/chunk',
      'assistant/chunk',
      'step/end',
      'turn/end',
    ])
    expect(ofType(session.events, 'step/end')).toEqual([{ finish: 'aborted' }])
    expect(ofType(session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'interrupted' }])

    await runAgent({ client, session, prompt: 'go on', tools: [], signal: new AbortController().signal })
    expect(server.requests[1]!.body.messages).toEqual([
      { role: 'user', content: 'long task' },
      { role: 'assistant', content: 'partial answer' },
      { role: 'user', content: 'go on' },
    ])
  })

  it('answers a call whose tool was interrupted with a cancelled result, so no call is left dangling', async () => {
    const controller = new AbortController()
    const slow = {
      ...addTool,
      name: 'slow',
      execute: (_input: unknown, context: { signal?: AbortSignal }) =>
        new Promise((_resolve, reject) => {
          controller.abort()
          context.signal?.addEventListener('abort', () => reject(new DriverOpenAIError('CANCELLED', 'stopped')), { once: true })
          if (context.signal?.aborted) reject(new DriverOpenAIError('CANCELLED', 'stopped'))
        }),
    }
    server = await startModelServer([
      callTools([
        { id: 'c1', name: 'slow', arguments: '{}' },
        { id: 'c2', name: 'add', arguments: '{"a":1,"b":1}' },
      ]),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'x', tools: [slow, addTool], signal: controller.signal })
    expect(outcome.reason).toBe('interrupted')
    expect(ofType(session.events, 'tool/result')).toEqual([
      { turn: 1, callId: 'c1', isError: true, content: { code: 'CANCELLED', message: 'stopped' } },
      { turn: 1, callId: 'c2', isError: true, content: { code: 'CANCELLED', message: 'The turn was interrupted before this tool ran.' } },
    ])
    expect(types(session).at(-1)).toBe('turn/end')
  })

  it('logs a tool result over TOOL_RESULT_MAX_BYTES as a TOOL_RESULT_TOO_LARGE error the model reads, and the turn goes on', async () => {
    // 'é' is two UTF-8 bytes: a result of that many characters is under the bound by its length, over it in bytes.
    const big = { ...addTool, name: 'big', execute: async () => ({ text: 'é'.repeat(TOOL_RESULT_MAX_BYTES / 2) }) }
    // `{"text":""}` is 11 bytes: this result's JSON is exactly the bound.
    const fits = { ...addTool, name: 'fits', execute: async () => ({ text: `${'é'.repeat((TOOL_RESULT_MAX_BYTES - 12) / 2)}a` }) }
    server = await startModelServer([
      callTools([
        { id: 'c1', name: 'big', arguments: '{}' },
        { id: 'c2', name: 'fits', arguments: '{}' },
      ]),
      answer(['done']),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'x', tools: [big, fits], signal: new AbortController().signal })
    expect(outcome).toEqual({ reason: 'completed', text: 'done' })
    const [tooLarge, kept] = ofType(session.events, 'tool/result') as { callId: string; isError?: boolean; content: unknown }[]
    expect(tooLarge).toMatchObject({ callId: 'c1', isError: true, content: { code: 'TOOL_RESULT_TOO_LARGE' } })
    expect((tooLarge!.content as { message: string }).message).toContain(`at most ${TOOL_RESULT_MAX_BYTES} bytes`)
    expect(kept).toMatchObject({ callId: 'c2', content: { text: expect.any(String) } })
    expect(Buffer.byteLength(JSON.stringify(kept!.content))).toBe(TOOL_RESULT_MAX_BYTES)
    expect(kept!.isError).toBeUndefined()
    const toolMessages = server.requests[1]!.body.messages.filter((m) => m.role === 'tool')
    expect(toolMessages.map((m) => m.tool_call_id)).toEqual(['c1', 'c2'])
    expect(String(toolMessages[0]!.content)).toContain('TOOL_RESULT_TOO_LARGE')
  })

  it('gives calls from a server that sends no ids distinct ids, and pairs each result with its call', async () => {
    server = await startModelServer([
      callTools([{ id: '', name: 'add', arguments: '{"a":1,"b":1}' }]),
      callTools([{ id: '', name: 'add', arguments: '{"a":2,"b":2}' }]),
      answer(['2 and 4']),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    expect((await runAgent({ client, session, prompt: 'x', tools: [addTool], signal: new AbortController().signal })).reason).toBe(
      'completed',
    )
    const calls = ofType(session.events, 'tool/call') as { callId: string }[]
    expect(new Set(calls.map((call) => call.callId)).size).toBe(2)
    const last = server.requests[2]!.body.messages.filter((m) => m.role === 'tool')
    expect(last.map((m) => [m.tool_call_id, m.content])).toEqual([
      [calls[0]!.callId, '2'],
      [calls[1]!.callId, '4'],
    ])
  })

  it('stops a model that never stops calling tools at the step limit', async () => {
    server = await startModelServer(() => callTools([{ id: 'again', name: 'add', arguments: '{"a":1,"b":2}' }]))
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'loop', tools: [addTool], signal: new AbortController().signal, maxSteps: 3 })
    expect(outcome.reason).toBe('error')
    expect((outcome.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_MAX_STEPS')
    expect(server.requests).toHaveLength(3)
    expect(ofType(session.events, 'assistant/error')).toHaveLength(1)
  })

  it('refuses to start a turn while another is open', async () => {
    server = await startModelServer([])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    session.append('turn/start', { turn: 1 })
    expect(() => runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })).toThrow(
      expect.objectContaining({ code: 'DRIVER_OPENAI_INVALID_OPTIONS' }),
    )
  })
})

describe('context from the session log', () => {
  it('a fork child sees the prefix it inherited from its parent', async () => {
    server = await startModelServer([answer(['parent answer']), answer(['child answer'])])
    const { client } = testClient(server.baseURL)
    const store = newStore()
    const parent = store.create()
    await runAgent({ client, session: parent, prompt: 'parent question', tools: [], signal: new AbortController().signal })
    const child = store.fork(parent)
    await runAgent({ client, session: child, prompt: 'child question', tools: [], signal: new AbortController().signal })
    expect(server.requests[1]!.body.messages).toEqual([
      { role: 'user', content: 'parent question' },
      { role: 'assistant', content: 'parent answer' },
      { role: 'user', content: 'child question' },
    ])
    expect(ofType(child.events, 'turn/start')).toEqual([{ turn: 1 }, { turn: 2 }])
  })

  it('answers a call the log shows no result for, drops a result without its call, and reads child notices as input', async () => {
    server = await startModelServer([answer(['ok'])])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    for (const [type, data] of [
      ['user/message', { text: 'q' }],
      ['turn/start', { turn: 1 }],
      ['assistant/chunk', { turn: 1, index: 0, delta: 'let me look' }],
      ['tool/call', { turn: 1, callId: 'k1', name: 'list_agents', arguments: {} }],
      ['turn/end', { turn: 1, reason: 'interrupted' }],
      ['tool/result', { turn: 2, callId: 'ghost', content: 'x' }],
      ['subagent/descriptor', { version: 2 }],
      ['user/message', { text: 'again' }],
      ['subagent/start', { kind: 'spawn', turn: 1 }],
      ['subagent/notice', { kind: 'settled', child: 'c1', mode: 'one-shot', label: 'scout', reason: 'completed', text: 'found it' }],
      ['subagent/notice', { kind: 'report', child: 'c2', text: 'half way' }],
    ] as const)
      session.append(type, data)
    await runAgent({ client, session, tools: [], system: 'be brief', signal: new AbortController().signal })
    expect(server.requests[0]!.body.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'q' },
      {
        role: 'assistant',
        content: 'let me look',
        tool_calls: [{ id: 'k1', type: 'function', function: { name: 'list_agents', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'k1', content: MISSING_RESULT_TEXT },
      { role: 'user', content: 'again' },
      { role: 'user', content: '[subagent "scout" (c1) settled: completed]\nfound it' },
      { role: 'user', content: '[report from subagent c2]\nhalf way' },
    ])
  })

  it('reads a notice that lands between a call and its result after the result, not as a missing result', async () => {
    server = await startModelServer([answer(['ok'])])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const notice = { kind: 'settled', child: 'c9', mode: 'one-shot', reason: 'completed', text: 'done' }
    for (const [type, data] of [
      ['user/message', { text: 'delegate' }],
      ['turn/start', { turn: 1 }],
      ['assistant/chunk', { turn: 1, index: 0, delta: 'on it' }],
      ['subagent/notice', notice],
      ['tool/call', { turn: 1, callId: 'k', name: 'subagent', arguments: { prompt: 'p' } }],
      ['subagent/notice', { ...notice, child: 'c10' }],
      ['tool/result', { turn: 1, callId: 'k', content: { text: 'c10 completed' } }],
      ['assistant/chunk', { turn: 1, index: 1, delta: 'fin' }],
      ['assistant/message', { turn: 1, text: 'fin' }],
      ['turn/end', { turn: 1, reason: 'completed' }],
    ] as const)
      session.append(type, data)
    await runAgent({ client, session, tools: [], signal: new AbortController().signal })
    expect(server.requests[0]!.body.messages).toEqual([
      { role: 'user', content: 'delegate' },
      {
        role: 'assistant',
        content: 'on it',
        tool_calls: [{ id: 'k', type: 'function', function: { name: 'subagent', arguments: '{"prompt":"p"}' } }],
      },
      { role: 'tool', tool_call_id: 'k', content: 'c10 completed' },
      { role: 'user', content: '[subagent c9 settled: completed]\ndone' },
      { role: 'user', content: '[subagent c10 settled: completed]\ndone' },
      { role: 'assistant', content: 'fin' },
    ])
  })

  it('sends reasoning back on the assistant messages that called tools, and only there', async () => {
    server = await startModelServer([
      { kind: 'stream', reasoning: ['I should ', 'add.'], toolCalls: [{ id: 'r1', name: 'add', arguments: '{"a":1,"b":2}' }] },
      answer(['3'], undefined, ['Done ', 'adding.']),
      answer(['ok'], undefined, ['Be polite.']),
    ])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    await runAgent({ client, session, prompt: 'add 1 and 2', tools: [addTool], signal: new AbortController().signal })
    await runAgent({ client, session, prompt: 'thanks', tools: [addTool], signal: new AbortController().signal })
    expect(ofType(session.events, 'assistant/reasoning').map((data) => (data as { delta: string }).delta)).toEqual([
      'I should ',
      'add.',
      'Done ',
      'adding.',
      'Be polite.',
    ])
    expect(server.requests[1]!.body.messages[1]).toMatchObject({
      role: 'assistant',
      reasoning_content: 'I should add.',
      tool_calls: [{ id: 'r1' }],
    })
    // What every later request carries: the tool-calling step's reasoning, not the answers'.
    expect(server.requests[2]!.body.messages).toEqual([
      { role: 'user', content: 'add 1 and 2' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'I should add.',
        tool_calls: [{ id: 'r1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } }],
      },
      { role: 'tool', tool_call_id: 'r1', content: '3' },
      { role: 'assistant', content: '3' },
      { role: 'user', content: 'thanks' },
    ])
  })

  it('renders a tool result as its text, an error as its code and message, anything else as JSON', async () => {
    server = await startModelServer([answer(['ok'])])
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    session.append('user/message', { text: 'q' })
    session.append('turn/start', { turn: 1 })
    const results = [
      { content: { text: 'rows', rows: [] } },
      { content: { code: 'SUBAGENT_BUSY', message: 'busy' }, isError: true },
      { content: [1, 2] },
      { content: 'plain' },
    ]
    for (const [i] of results.entries()) session.append('tool/call', { turn: 1, callId: `t${i}`, name: 'add', arguments: {} })
    for (const [i, result] of results.entries()) session.append('tool/result', { turn: 1, callId: `t${i}`, ...result })
    session.append('turn/end', { turn: 1, reason: 'completed' })
    await runAgent({ client, session, tools: [], signal: new AbortController().signal })
    const tools = server.requests[0]!.body.messages.filter((message) => message.role === 'tool')
    expect(tools.map((message) => message.content)).toEqual(['rows', 'Error SUBAGENT_BUSY: busy', '[1,2]', 'plain'])
  })
})
