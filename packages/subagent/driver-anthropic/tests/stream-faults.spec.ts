import { STEP_MAX_CHARS, STEP_MAX_PARTS } from '@dsh/driver-openai'
import { answer, type ModelServer, type Reply, startModelServer } from '@dsh/driver-openai/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type AnthropicClientOptions, type DriverAnthropicError, runAgent } from '../src/index.js'
import { newStore, ofType, testClient, types } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** One Messages stream event frame. */
const event = (type: string, data: Record<string, unknown> = {}): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const messageStart = event('message_start', {
  message: {
    id: 'msg_raw',
    type: 'message',
    role: 'assistant',
    model: 'm',
    content: [],
    stop_reason: null,
    usage: { input_tokens: 5, output_tokens: 1 },
  },
})
const finish = [event('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }), event('message_stop')]
const raw = (...body: string[]): Reply => ({ kind: 'raw', body })

async function run(reply: Reply | readonly Reply[], options: AnthropicClientOptions = {}) {
  server = await startModelServer(Array.isArray(reply) ? reply : () => reply as Reply)
  const { client } = testClient(server, options)
  const session = newStore().create()
  const outcome = await runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal, maxSteps: 1 })
  return { session, outcome, error: outcome.error as DriverAnthropicError | undefined }
}

describe('a model server that answers too much', () => {
  it('a content block index far past the bound is DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE at once', async () => {
    const index = 4_294_967_294
    const { session, error } = await run(
      raw(
        messageStart,
        event('content_block_start', { index, content_block: { type: 'text', text: '' } }),
        event('content_block_delta', { index, delta: { type: 'text_delta', text: 'hi' } }),
        ...finish,
      ),
    )
    expect(error?.code).toBe('DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE')
    expect(error?.message).toContain(`${STEP_MAX_PARTS}`)
    expect(types(session)).toEqual(['user/message', 'turn/start', 'step/start', 'step/end', 'assistant/error', 'turn/end'])
  })

  it('text past STEP_MAX_CHARS stops the step before the delta past it and before a whole-step message', async () => {
    const { session, error } = await run([answer(['x'.repeat(STEP_MAX_CHARS), 'y'.repeat(1024)])])
    expect(error?.code).toBe('DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE')
    expect(ofType(session.events, 'assistant/chunk')).toHaveLength(1)
    expect(ofType(session.events, 'assistant/message')).toEqual([])
  })

  it('tool input past STEP_MAX_CHARS stops the step with DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE before any tool/call', async () => {
    const piece = 'x'.repeat(STEP_MAX_CHARS / 4)
    const { session, error } = await run(
      raw(
        messageStart,
        event('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'add', input: {} } }),
        ...[0, 1, 2, 3, 4].map((i) =>
          event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: i === 0 ? `["${piece}` : piece } }),
        ),
        event('content_block_stop', { index: 0 }),
        ...finish,
      ),
    )
    expect(error?.code).toBe('DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE')
    expect(ofType(session.events, 'tool/call')).toEqual([])
  })
})

describe('a model server that answers garbage or stops short', () => {
  it('a stream that ends without a stop_reason is DRIVER_ANTHROPIC_REQUEST_FAILED, not a completed answer', async () => {
    const { session, outcome, error } = await run(
      raw(
        messageStart,
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'The answer is ' } }),
      ),
    )
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_ANTHROPIC_REQUEST_FAILED')
    expect(error?.message).toContain('ended before the message was finished')
    expect(ofType(session.events, 'assistant/message')).toEqual([])
  })

  it('an HTML page with status 200 is DRIVER_ANTHROPIC_REQUEST_FAILED saying it was no event stream: its content type and first bytes', async () => {
    const { outcome, error } = await run({ kind: 'raw', contentType: 'text/html', body: ['<html>Sign in to the network</html>'] })
    expect(outcome.reason).toBe('error')
    expect(error?.code).toBe('DRIVER_ANTHROPIC_REQUEST_FAILED')
    expect(error?.message).toBe(
      'The model request failed: The Anthropic API\'s reply was not an event stream (content-type "text/html", a body beginning "<html>Sign in to the network</html>"). Check --base-url: it must name an Anthropic Messages API (its origin, without /v1/messages).',
    )
  })

  it('events streamed under another content type are still read', async () => {
    const text = [
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Fine.' } }),
      event('content_block_stop', { index: 0 }),
    ]
    const { outcome } = await run({ kind: 'raw', contentType: 'text/plain', body: [messageStart, ...text, ...finish] })
    expect(outcome).toMatchObject({ reason: 'completed', text: 'Fine.' })
  })
})

describe('a model server that stalls', () => {
  it('mid-stream after output: timeoutMs bounds the silence between chunks too, and the turn ends DRIVER_ANTHROPIC_REQUEST_FAILED (not retried)', async () => {
    const { session, error } = await run({ kind: 'stream', content: ['half', ' never'], hangAfter: 1 }, { timeoutMs: 2_000 })
    expect(error?.code).toBe('DRIVER_ANTHROPIC_REQUEST_FAILED')
    expect(error?.message).toContain('timeoutMs')
    expect(server?.requests).toHaveLength(1)
    expect(ofType(session.events, 'assistant/chunk')).toHaveLength(1)
  })

  it('never while it keeps streaming: an answer whose events arrive well within timeoutMs of each other completes, however long it takes in all', async () => {
    const deltas = Array.from({ length: 12 }, (_, i) =>
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: `${i} ` } }),
    )
    const body = [
      messageStart,
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ...deltas,
      event('content_block_stop', { index: 0 }),
      ...finish,
    ]
    // 12 gaps of 250 ms among the deltas: over 3 s in all, past the 2 s of timeoutMs, never 2 s without an event.
    const { outcome, error } = await run({ kind: 'raw', gapMs: 250, body }, { timeoutMs: 2_000 })
    expect(error).toBeUndefined()
    expect(outcome.reason).toBe('completed')
    expect(outcome.text).toBe(deltas.map((_, i) => `${i} `).join(''))
    expect(server?.requests).toHaveLength(1)
  })

  it('before any output: retried like a lost connection, then DRIVER_ANTHROPIC_CONNECTION', async () => {
    const { error } = await run({ kind: 'stream', content: ['never'], hangAfter: 0 }, { timeoutMs: 1_000, retry: { maxAttempts: 2 } })
    expect(error?.code).toBe('DRIVER_ANTHROPIC_CONNECTION')
    expect(error?.message).toBe(
      'The Anthropic API sent nothing for 1000 ms (timeoutMs) after 2 attempts. Check that the server is responding.',
    )
    expect(server?.requests).toHaveLength(2)
  })
})

describe('a model server that answers an error with a huge body', () => {
  const FLOOD_BYTES = 64 * 1024 * 1024
  const head = '{"type":"error","error":{"type":"api_error","message":"'
  const flood = (status: number, headers: Record<string, string> = {}): Reply => ({
    kind: 'flood',
    status,
    headers,
    head,
    bytes: FLOOD_BYTES,
  })

  it('a 529 (retried after its retry-after) then a 400: each body is read only to its bound, and the turn ends DRIVER_ANTHROPIC_BAD_REQUEST', async () => {
    server = await startModelServer([flood(529, { 'retry-after': '2' }), flood(400)])
    const { client, waits } = testClient(server)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })
    expect(outcome.error).toMatchObject({ code: 'DRIVER_ANTHROPIC_BAD_REQUEST' })
    const message = (outcome.error as DriverAnthropicError).message
    expect(message).toContain(`(HTTP 400): 400 ${head}xxx`)
    expect(message.length).toBeLessThan(1_000)
    expect(server.requests).toHaveLength(2)
    expect(waits).toEqual([{ attempt: 1, retryAfterMs: 2_000 }])
    // The server saw the client stop: neither body was taken whole, nor more than the sockets on either side hold.
    for (const nth of [1, 2]) {
      const flooded = await server.flooded(nth)
      expect(flooded.complete).toBe(false)
      expect(flooded.written).toBeLessThan(FLOOD_BYTES / 4)
    }
  })
})

describe('a stream that breaks after the server reported usage', () => {
  const text = (delta: string): string[] => [
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: delta } }),
  ]

  it("records message_start's counts and a message_delta's output count on step/end {finish: 'error'}: those tokens were spent", async () => {
    const start = event('message_start', {
      message: {
        id: 'msg_cut',
        type: 'message',
        role: 'assistant',
        model: 'm',
        content: [],
        stop_reason: null,
        usage: { input_tokens: 5, output_tokens: 1, cache_read_input_tokens: 7, cache_creation_input_tokens: 11 },
      },
    })
    // A message_delta without a stop_reason: the output count so far, then the stream ends unfinished.
    const delta = event('message_delta', { delta: { stop_reason: null }, usage: { output_tokens: 4 } })
    const { session, error } = await run(raw(start, ...text('Half'), delta))
    expect(error?.code).toBe('DRIVER_ANTHROPIC_REQUEST_FAILED')
    expect(error?.usage).toEqual({ input: 5, output: 4, cacheRead: 7, cacheWrite: 11, reasoning: 0 })
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 5, output: 4, cacheRead: 7, cacheWrite: 11 }, finish: 'error' }])
  })

  it("records message_start's counts alone when the stream breaks before any message_delta", async () => {
    const { session } = await run(raw(messageStart, ...text('Half')))
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 5, output: 1 }, finish: 'error' }])
  })

  it('records no usage when the stream breaks before the server reported any', async () => {
    const { session, error } = await run(raw(...text('Half')))
    expect(error?.code).toBe('DRIVER_ANTHROPIC_REQUEST_FAILED')
    expect(error?.usage).toBeUndefined()
    expect(ofType(session.events, 'step/end')).toEqual([{ finish: 'error' }])
  })

  it("records the reported usage on step/end {finish: 'aborted'} when the caller cancels mid-stream", async () => {
    // Nothing after the text: whether the client reads past the abort or not, the reported usage is the same.
    server = await startModelServer(() => raw(messageStart, ...text('Half')))
    const { client } = testClient(server)
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
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 5, output: 1 }, finish: 'aborted' }])
  })
})
