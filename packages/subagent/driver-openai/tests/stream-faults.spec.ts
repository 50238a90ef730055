import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { afterEach, describe, expect, it, onTestFinished } from 'vitest'
import { type DriverOpenAIError, REPLY_HEAD_CHARS, runAgent, STEP_MAX_CHARS, STEP_MAX_PARTS } from '../src/index.js'
import { answer, type ModelServer, type Reply, startModelServer } from '../src/testing/model-server.js'
import { addTool, newStore, ofType, testClient, types } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** One Chat Completions chunk frame with the given choice delta (and finish reason). */
const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-raw', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const raw = (...body: string[]): Reply => ({ kind: 'raw', body })

async function run(reply: Reply, options: Parameters<typeof testClient>[1] = {}) {
  server = await startModelServer(() => reply)
  const { client } = testClient(server.baseURL, options)
  const session = newStore().create()
  const outcome = await runAgent({ client, session, prompt: 'x', tools: [addTool], signal: new AbortController().signal, maxSteps: 1 })
  return { session, outcome, error: outcome.error as DriverOpenAIError | undefined }
}

describe('a model server that answers too much', () => {
  it('a tool call index far past the bound is DRIVER_OPENAI_RESPONSE_TOO_LARGE at once, and nothing of it is logged', async () => {
    const call = { index: 4_294_967_294, id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } }
    const { session, error } = await run(raw(chunk({ tool_calls: [call] }), chunk({}, 'tool_calls'), 'data: [DONE]\n\n'))
    expect(error?.code).toBe('DRIVER_OPENAI_RESPONSE_TOO_LARGE')
    expect(error?.message).toContain(`${STEP_MAX_PARTS}`)
    expect(types(session)).toEqual(['user/message', 'turn/start', 'step/start', 'step/end', 'assistant/error', 'turn/end'])
  })

  it('a negative tool call index is DRIVER_OPENAI_REQUEST_FAILED, not a call dropped in silence', async () => {
    const call = { index: -1, id: 'c1', type: 'function', function: { name: 'add', arguments: '{}' } }
    const { session, outcome, error } = await run(raw(chunk({ tool_calls: [call] }), chunk({}, 'tool_calls'), 'data: [DONE]\n\n'))
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(ofType(session.events, 'assistant/message')).toEqual([])
  })

  it('a tool call index that is not a number is DRIVER_OPENAI_REQUEST_FAILED naming it cut to 40 code units, between characters', async () => {
    const call = { index: `x${'\u{1f600}'.repeat(50)}`, id: 'c1', type: 'function', function: { name: 'add', arguments: '{}' } }
    const { error } = await run(raw(chunk({ tool_calls: [call] }), chunk({}, 'tool_calls'), 'data: [DONE]\n\n'))
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    // Unit 40 is the first half of an emoji: the cut leaves it out whole.
    expect(error?.message).toContain(`not a non-negative integer: x${'\u{1f600}'.repeat(19)}….`)
  })

  it('tool call arguments past STEP_MAX_CHARS stop the step with DRIVER_OPENAI_RESPONSE_TOO_LARGE before any tool/call', async () => {
    const piece = 'x'.repeat(STEP_MAX_CHARS / 4)
    const fragments = [0, 1, 2, 3, 4].map((i) =>
      chunk({ tool_calls: [{ index: 0, function: { arguments: i === 0 ? `["${piece}` : piece } }] }),
    )
    const start = chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'add', arguments: '' } }] })
    const { session, error } = await run(raw(start, ...fragments, chunk({}, 'tool_calls'), 'data: [DONE]\n\n'))
    expect(error?.code).toBe('DRIVER_OPENAI_RESPONSE_TOO_LARGE')
    expect(ofType(session.events, 'tool/call')).toEqual([])
  })

  it('content past STEP_MAX_CHARS ends the turn typed, and the session stays persistable', async () => {
    server = await startModelServer([answer(['x'.repeat(STEP_MAX_CHARS), 'y'.repeat(1024), 'z']), answer(['short'])])
    const ctx = new Context()
    onTestFinished(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    const persistence = createMemoryPersistence()
    await ctx.activate(sessionPersistencePlugin(persistence))
    const session = ctx.require('sessions').create()
    const { client } = testClient(server.baseURL)
    const first = await runAgent({ client, session, prompt: 'long', tools: [], signal: new AbortController().signal })
    expect((first.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_RESPONSE_TOO_LARGE')
    // What streamed within the bound stays; the delta past it is not logged, nor is a whole-text message.
    expect(ofType(session.events, 'assistant/chunk')).toHaveLength(1)
    expect(ofType(session.events, 'assistant/message')).toEqual([])
    expect((await runAgent({ client, session, prompt: 'again', tools: [], signal: new AbortController().signal })).reason).toBe('completed')
    await ctx.require('sessions').flush(session)
    expect((await persistence.inspect(session.id)).events).toHaveLength(session.events.length)
  })
})

describe('a model server that answers garbage or stops short', () => {
  it('a stream that ends without a finish_reason is DRIVER_OPENAI_REQUEST_FAILED, not a completed answer', async () => {
    const { session, outcome, error } = await run(raw(chunk({ role: 'assistant', content: 'The answer is ' })))
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(error?.message).toContain('ended before the response was finished')
    expect(ofType(session.events, 'assistant/message')).toEqual([])
  })

  it('an HTML page with status 200 is DRIVER_OPENAI_REQUEST_FAILED saying it was no event stream: its content type and first bytes', async () => {
    const { outcome, error } = await run({ kind: 'raw', contentType: 'text/html', body: ['<html>Sign in to the network</html>'] })
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(error?.message).toBe(
      'The model request failed: The model server\'s reply was not an event stream (content-type "text/html", a body beginning "<html>Sign in to the network</html>"). Check --base-url: it must name an OpenAI-compatible API (often ending in /v1).',
    )
  })

  it("a reply's first bytes are shown escaped (no terminal control reaches the message) and capped at REPLY_HEAD_CHARS", async () => {
    const body = `{"note":"\u001b[2J\u202e\u{1f600}\n${'y'.repeat(5_000)}"}`
    const { error } = await run({ kind: 'raw', contentType: 'application/json', body: [body] })
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    const shown = /a body beginning (".*"…)\)/.exec(error!.message)![1]!
    expect(shown.startsWith('"{\\"note\\":\\"\\u001b[2J\\u202e\\ud83d\\ude00\\nyyy')).toBe(true)
    expect(shown.length).toBeLessThanOrEqual(REPLY_HEAD_CHARS + 3)
    expect(error!.message).toMatch(/^[\x20-\x7e…]*$/)
  })

  it('events streamed under another content type are still read: only a stream that ends unfinished says what it was', async () => {
    const { outcome } = await run({
      kind: 'raw',
      contentType: 'text/plain',
      body: [chunk({ role: 'assistant', content: 'Fine.' }), chunk({}, 'stop'), 'data: [DONE]\n\n'],
    })
    expect(outcome).toMatchObject({ reason: 'completed', text: 'Fine.' })
  })

  it('Responses: a JSON answer to a streamed request says it was no event stream', async () => {
    const { error } = await run(
      { kind: 'raw', contentType: 'application/json', body: ['{"id":"resp_1","output":[]}'] },
      { api: 'responses' },
    )
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(error?.message).toContain(
      'reply was not an event stream (content-type "application/json", a body beginning "{\\"id\\":\\"resp_1\\",\\"output\\":[]}").',
    )
  })

  it('Responses: a stream without response.completed is DRIVER_OPENAI_REQUEST_FAILED', async () => {
    const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
    const reply = raw(
      event('response.created', { sequence_number: 0, response: { id: 'resp_raw', output: [] } }),
      event('response.output_text.delta', { sequence_number: 1, item_id: 'm1', output_index: 0, content_index: 0, delta: 'Half' }),
    )
    const { outcome, error } = await run(reply, { api: 'responses' })
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
  })
})

describe('a model server that stalls', () => {
  it('mid-stream after output: timeoutMs bounds the silence between chunks too, and the turn ends DRIVER_OPENAI_REQUEST_FAILED (not retried)', async () => {
    const { session, error } = await run({ kind: 'stream', content: ['half', ' never'], hangAfter: 1 }, { timeoutMs: 2_000 })
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(error?.message).toBe(
      'The model stream broke after output was recorded (not retried, so nothing is logged twice): nothing for 2000 ms (timeoutMs).',
    )
    expect(server?.requests).toHaveLength(1)
    expect(ofType(session.events, 'assistant/chunk')).toHaveLength(1)
  })

  it('never while it keeps streaming: an answer whose chunks arrive well within timeoutMs of each other completes, however long it takes in all', async () => {
    const pieces = Array.from({ length: 12 }, (_, i) => chunk({ content: `${i} ` }))
    // 12 gaps of 250 ms: 3 s in all, past the 2 s of timeoutMs, never 2 s without a chunk.
    const reply: Reply = { kind: 'raw', gapMs: 250, body: [...pieces, chunk({}, 'stop'), 'data: [DONE]\n\n'] }
    const { session, outcome, error } = await run(reply, { timeoutMs: 2_000 })
    expect(error).toBeUndefined()
    expect(outcome.reason).toBe('completed')
    expect(outcome.text).toBe(pieces.map((_, i) => `${i} `).join(''))
    expect(ofType(session.events, 'assistant/message')).toEqual([expect.objectContaining({ text: outcome.text })])
    expect(server?.requests).toHaveLength(1)
  })

  it('before any output: retried like a lost connection, then DRIVER_OPENAI_CONNECTION', async () => {
    const { error } = await run({ kind: 'stream', content: ['never'], hangAfter: 0 }, { timeoutMs: 1_000, retry: { maxAttempts: 2 } })
    expect(error?.code).toBe('DRIVER_OPENAI_CONNECTION')
    expect(error?.message).toBe(
      'The model server sent nothing for 1000 ms (timeoutMs) after 2 attempts. Check that the server is responding.',
    )
    expect(server?.requests).toHaveLength(2)
  })
})

describe('a stream that breaks after the server reported usage', () => {
  const usageChunk = (usage: Record<string, unknown>): string =>
    `data: ${JSON.stringify({ id: 'chatcmpl-raw', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage })}\n\n`
  const responsesEvent = (type: string, data: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

  it("Chat: a usage chunk before the break is recorded, disjoint, on step/end {finish: 'error'}", async () => {
    const usage = { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } }
    const { session, error } = await run(raw(chunk({ content: 'Half' }), usageChunk(usage)))
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(error?.usage).toEqual({ input: 7, output: 2, cacheRead: 3, reasoning: 0 })
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 7, output: 2, cacheRead: 3 }, finish: 'error' }])
  })

  it('Chat: a break before any usage chunk records no usage', async () => {
    const { session, error } = await run(raw(chunk({ content: 'Half' })))
    expect(error?.usage).toBeUndefined()
    expect(ofType(session.events, 'step/end')).toEqual([{ finish: 'error' }])
  })

  it("Responses: response.failed's usage is recorded on step/end {finish: 'error'}", async () => {
    const reply = raw(
      responsesEvent('response.created', { sequence_number: 0, response: { id: 'resp_raw', output: [] } }),
      responsesEvent('response.output_text.delta', { sequence_number: 1, item_id: 'm1', output_index: 0, content_index: 0, delta: 'Half' }),
      responsesEvent('response.failed', {
        sequence_number: 2,
        response: {
          id: 'resp_raw',
          status: 'failed',
          output: [],
          error: { code: 'server_error', message: 'The model fell over.' },
          usage: { input_tokens: 9, output_tokens: 4, output_tokens_details: { reasoning_tokens: 1 } },
        },
      }),
    )
    const { session, error } = await run(reply, { api: 'responses' })
    expect(error?.code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 9, output: 3, reasoning: 1 }, finish: 'error' }])
  })

  it('Responses: a break before any usage event records no usage', async () => {
    const reply = raw(
      responsesEvent('response.created', { sequence_number: 0, response: { id: 'resp_raw', output: [] } }),
      responsesEvent('response.output_text.delta', { sequence_number: 1, item_id: 'm1', output_index: 0, content_index: 0, delta: 'Half' }),
    )
    const { session } = await run(reply, { api: 'responses' })
    expect(ofType(session.events, 'step/end')).toEqual([{ finish: 'error' }])
  })

  it("Chat: the reported usage is recorded on step/end {finish: 'aborted'} when the caller cancels mid-stream", async () => {
    server = await startModelServer(() =>
      raw(usageChunk({ prompt_tokens: 6, completion_tokens: 1 }), chunk({ content: 'Half' }), chunk({}, 'stop'), 'data: [DONE]\n\n'),
    )
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const controller = new AbortController()
    const outcome = await runAgent({
      client,
      session,
      prompt: 'x',
      tools: [],
      signal: controller.signal,
      onEvent: (appended) => {
        if (appended.type === 'assistant/chunk') controller.abort()
      },
    })
    expect(outcome.reason).toBe('interrupted')
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 6, output: 1 }, finish: 'aborted' }])
  })
})
