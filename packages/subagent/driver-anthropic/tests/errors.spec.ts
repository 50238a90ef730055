import { ERROR_TEXT_MAX_CHARS } from '@dsh/driver-openai'
import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { createAnthropicClient, DriverAnthropicError, runAgent } from '../src/index.js'
import { messagesURL, newStore, ofType, TEST_KEY, testClient } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const signal = new AbortController().signal

async function turn(client: ReturnType<typeof testClient>['client']) {
  const session = newStore().create()
  const outcome = await runAgent({ client, session, prompt: 'Hi', tools: [], signal })
  return { session, outcome }
}

describe('retries (attempts counted at the server)', () => {
  it('retries a 429 after the retry-after the server asked for, then completes', async () => {
    server = await startModelServer([
      { kind: 'error', status: 429, message: 'Rate limited.', headers: { 'retry-after': '0' } },
      answer(['Hello']),
    ])
    const { client, waits } = testClient(server)
    const { outcome, session } = await turn(client)
    expect(outcome).toEqual({ reason: 'completed', text: 'Hello' })
    expect(server.requests).toHaveLength(2)
    expect(waits).toEqual([{ attempt: 1, retryAfterMs: 0 }])
    // The retries of one call are inside one step.
    expect(ofType(session.events, 'step/start')).toHaveLength(1)
  })

  it('retries 529 (overloaded) and 500 with the default backoff when the server says retry-after: 0', async () => {
    server = await startModelServer([
      { kind: 'error', status: 529, message: 'Overloaded.', headers: { 'retry-after': '0' } },
      { kind: 'error', status: 500, message: 'Internal error.', headers: { 'retry-after': '0' } },
      answer(['Hello']),
    ])
    const client = createAnthropicClient({ baseURL: messagesURL(server), apiKey: TEST_KEY, model: 'claude-test', env: {} })
    const { outcome } = await turn(client)
    expect(outcome.reason).toBe('completed')
    expect(server.requests).toHaveLength(3)
  })

  it('gives up after maxAttempts with a typed error per status: 529 OVERLOADED, 429 RATE_LIMITED, 503 UNAVAILABLE', async () => {
    for (const [status, code] of [
      [529, 'DRIVER_ANTHROPIC_OVERLOADED'],
      [429, 'DRIVER_ANTHROPIC_RATE_LIMITED'],
      [503, 'DRIVER_ANTHROPIC_UNAVAILABLE'],
    ] as const) {
      server = await startModelServer(() => ({ kind: 'error', status, message: 'Try later.', headers: { 'retry-after': '0' } }))
      const { client, waits } = testClient(server)
      const { outcome, session } = await turn(client)
      expect(outcome.reason).toBe('error')
      expect(outcome.error).toBeInstanceOf(DriverAnthropicError)
      expect(outcome.error).toMatchObject({ code, message: expect.stringContaining('after 3 attempts') })
      expect(server.requests).toHaveLength(3)
      expect(waits.map((wait) => wait.attempt)).toEqual([1, 2])
      expect(ofType(session.events, 'turn/end')).toEqual([{ turn: 1, reason: 'error' }])
      await server.close()
      server = undefined
    }
  })

  it('does not retry 400, 401 or 404; the server message is kept with the key blanked out', async () => {
    for (const [status, code] of [
      [400, 'DRIVER_ANTHROPIC_BAD_REQUEST'],
      [401, 'DRIVER_ANTHROPIC_UNAUTHORIZED'],
      [404, 'DRIVER_ANTHROPIC_NOT_FOUND'],
    ] as const) {
      server = await startModelServer(() => ({ kind: 'error', status, message: `Refused key ${TEST_KEY}.`, type: `error ${TEST_KEY}` }))
      const { client } = testClient(server)
      const { outcome, session } = await turn(client)
      expect(server.requests).toHaveLength(1)
      expect(outcome.error).toMatchObject({ code, message: expect.stringContaining('Refused key [redacted]') })
      expect(JSON.stringify(session.events)).not.toContain(TEST_KEY)
      // The server's error type is kept in the details, blanked out as well.
      expect(JSON.stringify((outcome.error as DriverAnthropicError).details)).toContain('[redacted]')
      expect(JSON.stringify((outcome.error as DriverAnthropicError).details)).not.toContain(TEST_KEY)
      await server.close()
      server = undefined
    }
  })

  it('keeps ERROR_TEXT_MAX_CHARS of a long server message, the cut marked, redacted before it is cut', async () => {
    const message = `${TEST_KEY} ${'y'.repeat(10 * ERROR_TEXT_MAX_CHARS)}`
    server = await startModelServer(() => ({ kind: 'error', status: 400, message }))
    const { client } = testClient(server)
    const { outcome } = await turn(client)
    const error = outcome.error as DriverAnthropicError
    expect(error.code).toBe('DRIVER_ANTHROPIC_BAD_REQUEST')
    const shown = error.message.slice(error.message.indexOf('(HTTP 400): ') + '(HTTP 400): '.length)
    expect(shown).toBe(`${`[redacted] ${'y'.repeat(10 * ERROR_TEXT_MAX_CHARS)}`.slice(0, ERROR_TEXT_MAX_CHARS)}…`)
  })

  it('a stream that breaks after output was recorded is not retried (nothing is logged twice): DRIVER_ANTHROPIC_REQUEST_FAILED', async () => {
    server = await startModelServer(() => ({ kind: 'stream', content: ['Half ', 'an answer'], hangAfter: 1 }))
    const { client } = testClient(server)
    const session = newStore().create()
    const running = runAgent({ client, session, prompt: 'Hi', tools: [], signal })
    await server.hung()
    for (let i = 0; i < 10_000 && !session.events.some((event) => event.type === 'assistant/chunk'); i++)
      await new Promise((resolve) => setImmediate(resolve))
    await server.close()
    const outcome = await running
    expect(outcome.error).toMatchObject({ code: 'DRIVER_ANTHROPIC_REQUEST_FAILED', message: expect.stringContaining('not retried') })
    expect(server.requests).toHaveLength(1)
    expect(ofType(session.events, 'assistant/chunk')).toEqual([{ turn: 1, index: 0, delta: 'Half ' }])
    // message_start had reported the call's usage: the failed step records it.
    expect(ofType(session.events, 'step/end')).toEqual([{ usage: { input: 0, output: 1, cacheWrite: 4 }, finish: 'error' }])
    server = undefined
  })

  it('sends the key in its header only, never in the body', async () => {
    server = await startModelServer([answer(['ok'])])
    const { client } = testClient(server)
    await turn(client)
    const headers = server.requests[0]?.headers ?? {}
    expect(JSON.stringify(headers)).toContain(TEST_KEY)
    expect(JSON.stringify(server.requests[0]?.body)).not.toContain(TEST_KEY)
  })
})

describe('configuration', () => {
  it('without a key is DRIVER_ANTHROPIC_NO_API_KEY; ANTHROPIC_API_KEY or DSH_API_KEY supplies one', () => {
    expect(() => createAnthropicClient({ env: {} })).toThrow(expect.objectContaining({ code: 'DRIVER_ANTHROPIC_NO_API_KEY' }))
    expect(createAnthropicClient({ env: { ANTHROPIC_API_KEY: 'k1' } }).provider).toBe('api.anthropic.com')
    expect(createAnthropicClient({ env: { DSH_API_KEY: 'k2', DSH_MODEL: 'claude-x' } }).model).toBe('claude-x')
  })

  it('bad options are DRIVER_ANTHROPIC_INVALID_OPTIONS naming what to fix', () => {
    const bad = [
      { baseURL: 'not a url' },
      { baseURL: 'ftp://example.com' },
      { baseURL: 'https://user:pw@example.com' },
      { maxTokens: 0 },
      { thinkingBudget: 512 },
      { maxTokens: 2000, thinkingBudget: 2000 },
      { retry: { maxAttempts: 0 } },
      { timeoutMs: -1 },
    ]
    for (const options of bad) {
      expect(() => createAnthropicClient({ apiKey: 'k', env: {}, ...options })).toThrow(
        expect.objectContaining({ code: 'DRIVER_ANTHROPIC_INVALID_OPTIONS' }),
      )
    }
  })
})

describe('messages end each sentence with one period', () => {
  it("an unreachable server: the library's reason then the advice, one period between them", async () => {
    const closed = await startModelServer([])
    const baseURL = messagesURL(closed)
    await closed.close()
    const client = createAnthropicClient({ baseURL, apiKey: 'k', env: {}, retry: { maxAttempts: 2, backoff: async () => {} } })
    const { outcome } = await turn(client)
    const error = outcome.error as DriverAnthropicError
    expect(error.code).toBe('DRIVER_ANTHROPIC_CONNECTION')
    expect(error.message).toMatch(
      /^Could not reach the Anthropic API after 2 attempts: Connection\b.*[^.]\. Check --base-url and that the server is running\.$/,
    )
  })

  it('a refused key or a missing route whose server message ends with a period: one period before the advice', async () => {
    server = await startModelServer([
      { kind: 'error', status: 401, message: 'invalid x-api-key.' },
      { kind: 'error', status: 404, message: 'model: claude-nope.' },
    ])
    const { client } = testClient(server)
    const messages = [(await turn(client)).outcome, (await turn(client)).outcome].map((o) => (o.error as DriverAnthropicError).message)
    expect(messages).toEqual([
      'The Anthropic API refused the API key (HTTP 401): invalid x-api-key. Check ANTHROPIC_API_KEY or DSH_API_KEY.',
      'No such model or route (HTTP 404): model: claude-nope. Check --model and --base-url.',
    ])
  })
})
