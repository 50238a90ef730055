import { answer, type MessagesUsage, type ModelServer, startModelServer, thinkingSignature } from '@dsh/driver-openai/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { runAgent } from '../src/index.js'
import { addTool, bodyOf, newStore, ofType, testClient, types } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

describe('runAgent over a Messages server', () => {
  it('streams thinking and text deltas, and ends with the step as blocks (signed reasoning, text) and its usage', async () => {
    server = await startModelServer([answer(['Hel', 'lo, ', 'world'], undefined, ['Let me ', 'think.'])])
    const { client } = testClient(server)
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
    expect(ofType(session.events, 'step/start')).toEqual([{ model: 'claude-test', provider: '127.0.0.1' }])
    expect(ofType(session.events, 'assistant/reasoning')).toEqual([
      { turn: 1, index: 0, delta: 'Let me ' },
      { turn: 1, index: 1, delta: 'think.' },
    ])
    const sent = server.reported[0]?.usage as unknown as MessagesUsage
    // The server's input counts are disjoint already and map one to one; its output count includes the thinking tokens.
    expect(sent).toMatchObject({ output_tokens: 12, cache_read_input_tokens: 0, output_tokens_details: { thinking_tokens: 4 } })
    expect(sent.cache_creation_input_tokens).toBeGreaterThan(0)
    const usage = { input: sent.input_tokens, output: 8, cacheWrite: sent.cache_creation_input_tokens, reasoning: 4 }
    expect(ofType(session.events, 'assistant/message')).toEqual([
      {
        turn: 1,
        text: 'Hello, world',
        blocks: [
          { type: 'reasoning', text: 'Let me think.', signature: thinkingSignature('Let me think.') },
          { type: 'text', text: 'Hello, world' },
        ],
        usage,
        provider: '127.0.0.1',
        model: 'claude-test',
      },
    ])
    expect(ofType(session.events, 'step/end')).toEqual([{ usage, finish: 'stop', responseId: expect.stringMatching(/^msg_test_/) }])
    expect(bodyOf(server.requests[0])).toMatchObject({ model: 'claude-test', max_tokens: 16_000, stream: true })
  })

  it('sends each tool step back with its signed thinking first, its tool_use blocks, and the results (a failed one is_error)', async () => {
    server = await startModelServer([
      {
        kind: 'stream',
        reasoning: ['Two tools: ', 'add, then a missing one.'],
        toolCalls: [
          { id: 'toolu_add', name: 'add', arguments: '{"a":2,"b":3}' },
          { id: 'toolu_missing', name: 'multiply', arguments: '{"a":2}' },
        ],
      },
      answer(['2 + 3 = 5; there is no multiply.'], undefined, ['Answer now.']),
    ])
    const { client } = testClient(server, { thinkingBudget: 2048 })
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'Add 2 and 3', tools: [addTool], signal: new AbortController().signal })

    expect(outcome).toEqual({ reason: 'completed', text: '2 + 3 = 5; there is no multiply.' })
    expect(types(session).slice(0, 12)).toEqual([
      'user/message',
      'turn/start',
      'step/start',
      'assistant/reasoning',
      'assistant/reasoning',
      'assistant/message',
      'tool/call',
      'tool/call',
      'step/end',
      'tool/result',
      'tool/result',
      'step/start',
    ])
    const thought = 'Two tools: add, then a missing one.'
    expect(ofType(session.events, 'assistant/message')[0]).toEqual({
      turn: 1,
      text: '',
      blocks: [
        { type: 'reasoning', text: thought, signature: thinkingSignature(thought) },
        { type: 'tool-call', id: 'toolu_add', name: 'add', input: { a: 2, b: 3 }, arguments: '{"a":2,"b":3}' },
        { type: 'tool-call', id: 'toolu_missing', name: 'multiply', input: { a: 2 }, arguments: '{"a":2}' },
      ],
      provider: '127.0.0.1',
      model: 'claude-test',
    })
    expect(ofType(session.events, 'tool/call')).toEqual([
      { turn: 1, callId: 'toolu_add', name: 'add', arguments: { a: 2, b: 3 } },
      { turn: 1, callId: 'toolu_missing', name: 'multiply', arguments: { a: 2 } },
    ])
    expect(ofType(session.events, 'step/end')[0]).toMatchObject({ finish: 'tool-calls' })
    expect(ofType(session.events, 'tool/result')[1]).toMatchObject({ callId: 'toolu_missing', isError: true })

    const first = bodyOf(server.requests[0])
    expect(first.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 })
    expect(first.tools).toEqual([
      {
        name: 'add',
        description: 'Add two numbers a and b.',
        input_schema: {
          type: 'object',
          properties: { a: { type: 'number' }, b: { type: 'number' } },
          required: ['a', 'b'],
          additionalProperties: false,
        },
      },
    ])
    // The server refuses a tool loop whose assistant message does not start with its signed thinking:
    // the second request got through, so the signature round-tripped.
    expect(server.requests).toHaveLength(2)
    expect(bodyOf(server.requests[1]).messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Add 2 and 3' }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: thought, signature: thinkingSignature(thought) },
          { type: 'tool_use', id: 'toolu_add', name: 'add', input: { a: 2, b: 3 } },
          { type: 'tool_use', id: 'toolu_missing', name: 'multiply', input: { a: 2 } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_add', content: [{ type: 'text', text: '5' }] },
          {
            type: 'tool_result',
            tool_use_id: 'toolu_missing',
            content: [{ type: 'text', text: 'Error TOOL_UNKNOWN: There is no tool named "multiply". Available tools: add.' }],
            is_error: true,
            cache_control: { type: 'ephemeral' },
          },
        ],
      },
    ])
    // The second request reads the prefix the first one wrote (the prompt, up to its breakpoint) from the cache.
    const [one, two] = server.reported.map((report) => report.usage as unknown as MessagesUsage)
    expect(one?.cache_read_input_tokens).toBe(0)
    expect(two?.cache_read_input_tokens).toBe(one?.cache_creation_input_tokens)
    expect(ofType(session.events, 'step/end')[1]).toMatchObject({
      usage: { cacheRead: two?.cache_read_input_tokens, cacheWrite: two?.cache_creation_input_tokens },
    })
  })

  it('puts cache breakpoints on the system prompt and the prefix before the newest turn; the next turn reads it', async () => {
    server = await startModelServer([answer(['Hi.']), answer(['Bye.'])])
    const { client } = testClient(server)
    const session = newStore().create()
    const signal = new AbortController().signal
    await runAgent({ client, session, prompt: 'Hello', system: 'You are terse.', tools: [], signal })
    await runAgent({ client, session, prompt: 'Goodbye', system: 'You are terse.', tools: [], signal })

    const [first, second] = server.requests.map(bodyOf)
    expect(first?.system).toEqual([{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }])
    expect(second?.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Hello' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Hi.', cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: [{ type: 'text', text: 'Goodbye', cache_control: { type: 'ephemeral' } }] },
    ])
    const [one, two] = server.reported.map((report) => report.usage as unknown as MessagesUsage)
    expect(two?.cache_read_input_tokens).toBe(one?.cache_creation_input_tokens)
    expect(two?.cache_creation_input_tokens).toBeGreaterThan(0)
    const usage = ofType(session.events, 'step/end').map((end) => (end as { usage: unknown }).usage)
    expect(usage[1]).toEqual({
      input: two?.input_tokens,
      output: two?.output_tokens,
      cacheRead: two?.cache_read_input_tokens,
      cacheWrite: two?.cache_creation_input_tokens,
    })
  })

  it('sends an image the prompt references as a base64 image block (bytes inline in a small reference)', async () => {
    server = await startModelServer([answer(['A red dot.'])])
    const { client } = testClient(server)
    const session = newStore().create()
    const data = Buffer.from('not really a png').toString('base64')
    const image = { digest: 'a'.repeat(64), mediaType: 'image/png', size: 16, name: 'dot.png', data }
    session.append('user/message', {
      text: 'What is this?',
      blocks: [
        { type: 'text', text: 'What is this?' },
        { type: 'image', attachment: image },
      ],
    })
    await runAgent({ client, session, tools: [], signal: new AbortController().signal })
    expect(bodyOf(server.requests[0]).messages[0]?.content).toEqual([
      { type: 'text', text: 'What is this?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data }, cache_control: { type: 'ephemeral' } },
    ])
  })

  it('a thinking block whose signature the API cannot verify is refused: the turn ends with DRIVER_ANTHROPIC_BAD_REQUEST', async () => {
    server = await startModelServer([answer(['unused'])])
    const { client } = testClient(server)
    const session = newStore().create()
    session.append('user/message', { text: 'Earlier' })
    session.append('turn/start', { turn: 1 })
    session.append('assistant/message', {
      turn: 1,
      text: 'Earlier answer.',
      blocks: [
        { type: 'reasoning', text: 'A thought.', signature: 'sig_not-the-servers' },
        { type: 'text', text: 'Earlier answer.' },
      ],
    })
    session.append('turn/end', { turn: 1, reason: 'completed' })
    const outcome = await runAgent({ client, session, prompt: 'Again', tools: [], signal: new AbortController().signal })

    expect(outcome.reason).toBe('error')
    expect(outcome.error).toMatchObject({ code: 'DRIVER_ANTHROPIC_BAD_REQUEST', message: expect.stringContaining('signature') })
    expect(ofType(session.events, 'step/end').at(-1)).toEqual({ finish: 'error' })
    expect(ofType(session.events, 'assistant/error')).toEqual([
      { turn: 2, code: 'DRIVER_ANTHROPIC_BAD_REQUEST', message: expect.any(String) },
    ])
  })

  it('an abort mid-stream ends the turn interrupted and the step aborted, keeping what streamed', async () => {
    server = await startModelServer([{ kind: 'stream', content: ['Partial ', 'answer'], hangAfter: 1 }])
    const { client } = testClient(server)
    const session = newStore().create()
    const controller = new AbortController()
    const running = runAgent({ client, session, prompt: 'Go', tools: [], signal: controller.signal })
    await server.hung()
    await until(() => session.events.some((event) => event.type === 'assistant/chunk'))
    controller.abort()
    const outcome = await running

    expect(outcome.reason).toBe('interrupted')
    expect(types(session)).toEqual(['user/message', 'turn/start', 'step/start', 'assistant/chunk', 'step/end', 'turn/end'])
    // message_start had reported the call's usage: the aborted step records it.
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 0, output: 1, cacheWrite: 4 }, finish: 'aborted' }])
    expect(ofType(session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'interrupted' }])
  })
})

/** Resolves once `condition` holds, checking after each macrotask (bounded by count, not time). */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve))
  if (!condition()) throw new Error('condition never held')
}
