import { afterEach, describe, expect, it } from 'vitest'
import { resolveModelConfig } from '../src/config.js'
import { createModelClient, type DriverOpenAIError, runAgent } from '../src/index.js'
import { retryAfterMs } from '../src/retry.js'
import { answer, type ModelServer, type Reply, startModelServer } from '../src/testing/model-server.js'
import { newStore, testClient } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (error) {
    return (error as DriverOpenAIError).code
  }
  return undefined
}

describe('configuration', () => {
  it('reads the environment in order and never echoes the key', () => {
    const config = resolveModelConfig({
      env: { OPENAI_API_KEY: 'sk-b', DSH_API_KEY: 'sk-a', DSH_BASE_URL: 'http://127.0.0.1:8000/v1/', DSH_MODEL: 'm1' },
    })
    expect(config).toMatchObject({ apiKey: 'sk-a', baseURL: 'http://127.0.0.1:8000/v1', model: 'm1' })
    expect(config.redact('Bearer sk-a and sk-a')).toBe('Bearer [redacted] and [redacted]')
    expect(resolveModelConfig({ env: { OPENAI_API_KEY: 'sk-b', OPENAI_BASE_URL: 'https://example.test/v1' } })).toMatchObject({
      apiKey: 'sk-b',
      baseURL: 'https://example.test/v1',
      model: 'deepseek-v4-flash',
    })
  })

  it('refuses bad options with DRIVER_OPENAI_INVALID_OPTIONS and a missing key with DRIVER_OPENAI_NO_API_KEY', () => {
    expect(codeOf(() => resolveModelConfig({ env: {}, apiKey: 'k', baseURL: 'not a url' }))).toBe('DRIVER_OPENAI_INVALID_OPTIONS')
    expect(codeOf(() => resolveModelConfig({ env: {}, apiKey: 'k', baseURL: 'ftp://host/v1' }))).toBe('DRIVER_OPENAI_INVALID_OPTIONS')
    expect(codeOf(() => resolveModelConfig({ env: {}, apiKey: 'k', baseURL: 'https://user:secret@host/v1' }))).toBe(
      'DRIVER_OPENAI_INVALID_OPTIONS',
    )
    expect(codeOf(() => resolveModelConfig({ env: {}, apiKey: 'k', model: ' ' }))).toBe('DRIVER_OPENAI_INVALID_OPTIONS')
    expect(codeOf(() => createModelClient({ env: {}, apiKey: 'k', retry: { maxAttempts: 0 } }))).toBe('DRIVER_OPENAI_INVALID_OPTIONS')
    expect(codeOf(() => createModelClient({ env: {}, apiKey: 'k', timeoutMs: -1 }))).toBe('DRIVER_OPENAI_INVALID_OPTIONS')
    expect(codeOf(() => resolveModelConfig({ env: { DSH_API_KEY: '' } }))).toBe('DRIVER_OPENAI_NO_API_KEY')
  })

  it('reads retry-after-ms, retry-after in seconds, and retry-after as an HTTP date', () => {
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '250' }))).toBe(250)
    expect(retryAfterMs(new Headers({ 'retry-after': '1.5' }))).toBe(1500)
    expect(retryAfterMs(new Headers({ 'retry-after': new Date(10_000).toUTCString() }), 4_000)).toBe(6_000)
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeUndefined()
    expect(retryAfterMs(new Headers())).toBeUndefined()
  })
})

describe('every HTTP failure has its code, recorded in the turn', () => {
  const cases: [Reply, string, number][] = [
    [{ kind: 'error', status: 401, message: 'bad key', type: 'authentication_error' }, 'DRIVER_OPENAI_UNAUTHORIZED', 1],
    [{ kind: 'error', status: 403, message: 'forbidden' }, 'DRIVER_OPENAI_UNAUTHORIZED', 1],
    [
      { kind: 'error', status: 404, message: 'The model `nope` does not exist', type: 'invalid_request_error' },
      'DRIVER_OPENAI_NOT_FOUND',
      1,
    ],
    [{ kind: 'error', status: 422, message: 'unprocessable' }, 'DRIVER_OPENAI_BAD_REQUEST', 1],
    [{ kind: 'error', status: 418, message: 'teapot' }, 'DRIVER_OPENAI_REQUEST_FAILED', 1],
    [{ kind: 'error', status: 429, message: 'slow down' }, 'DRIVER_OPENAI_RATE_LIMITED', 3],
    [{ kind: 'error', status: 503, message: 'overloaded' }, 'DRIVER_OPENAI_UNAVAILABLE', 3],
  ]
  for (const [reply, code, requests] of cases) {
    it(`HTTP ${(reply as { status: number }).status} → ${code} after ${requests} request(s)`, async () => {
      server = await startModelServer(() => reply)
      const { client } = testClient(server.baseURL)
      const session = newStore().create()
      const outcome = await runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })
      expect((outcome.error as DriverOpenAIError).code).toBe(code)
      expect((outcome.error as DriverOpenAIError).message).toContain((reply as { message: string }).message)
      expect(server.requests).toHaveLength(requests)
      expect(session.events.at(-2)).toMatchObject({ type: 'assistant/error', data: { code } })
      expect(session.events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'error' } })
    })
  }

  it('a stream that breaks after output was recorded is not retried (no delta is logged twice)', async () => {
    let first = true
    server = await startModelServer(() => {
      if (!first) return answer(['never asked'])
      first = false
      return { kind: 'stream', content: ['half ', 'way'], hangAfter: 2 }
    })
    const { client } = testClient(server.baseURL, { timeoutMs: 1_000_000 })
    const session = newStore().create()
    const running = runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })
    await server.hung()
    while (session.events.filter((event) => event.type === 'assistant/chunk').length < 2)
      await new Promise((resolve) => setTimeout(resolve, 5))
    await server.close() // the connection drops mid-stream
    server = undefined
    const outcome = await running
    expect(outcome.reason).toBe('error')
    expect((outcome.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_REQUEST_FAILED')
    expect((outcome.error as DriverOpenAIError).message).toMatch(/^The model stream broke after output was recorded/)
    expect(
      session.events.filter((event) => event.type === 'assistant/chunk').map((event) => (event.data as { delta: string }).delta),
    ).toEqual(['half ', 'way'])
  })
})

describe('messages end each sentence with one period', () => {
  it("an unreachable server: the library's 'Connection error.' then the advice, no doubled period", async () => {
    const closed = await startModelServer([])
    const baseURL = closed.baseURL
    await closed.close()
    const client = createModelClient({ baseURL, apiKey: 'k', env: {}, retry: { maxAttempts: 2, backoff: async () => {} } })
    const outcome = await runAgent({ client, session: newStore().create(), prompt: 'x', tools: [], signal: new AbortController().signal })
    const error = outcome.error as DriverOpenAIError
    expect(error.code).toBe('DRIVER_OPENAI_CONNECTION')
    expect(error.message).toBe(
      'Could not reach the model server after 2 attempts: Connection error. Check --base-url and that the server is running.',
    )
  })

  it('a refused key or a missing route whose server message ends with a period: one period before the advice', async () => {
    server = await startModelServer([
      { kind: 'error', status: 401, message: 'Incorrect API key provided.' },
      { kind: 'error', status: 404, message: 'The model does not exist.' },
    ])
    const { client } = testClient(server.baseURL)
    const messages: string[] = []
    for (let i = 0; i < 2; i++) {
      const outcome = await runAgent({ client, session: newStore().create(), prompt: 'x', tools: [], signal: new AbortController().signal })
      messages.push((outcome.error as DriverOpenAIError).message)
    }
    expect(messages).toEqual([
      'The model server refused the API key (HTTP 401): Incorrect API key provided. Check DSH_API_KEY.',
      'The model server has no such model or route (HTTP 404): The model does not exist. Check --model and --base-url.',
    ])
  })
})
