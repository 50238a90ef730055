import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createModelClient, type DriverOpenAIError, runAgent } from '../src/index.js'
import { answer, callTools, type ModelServer, startModelServer } from '../src/testing/model-server.js'
import { addTool, newStore, TEST_KEY, testClient } from './helpers.js'

/** Everything written to the console while a test runs (console.* and raw stdout/stderr writes). */
let captured: string[] = []
const restore: (() => void)[] = []
let server: ModelServer | undefined

beforeEach(() => {
  captured = []
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream)
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      captured.push(String(chunk))
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest)
    }) as typeof stream.write
    restore.push(() => {
      stream.write = write
    })
  }
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    const original = console[method]
    console[method] = (...args: unknown[]) => {
      captured.push(args.map(String).join(' '))
    }
    restore.push(() => {
      console[method] = original
    })
  }
  // The openai client would log requests at debug level if it listened to this.
  const previous = process.env.OPENAI_LOG
  process.env.OPENAI_LOG = 'debug'
  restore.push(() => {
    if (previous === undefined) delete process.env.OPENAI_LOG
    else process.env.OPENAI_LOG = previous
  })
})

afterEach(async () => {
  for (const undo of restore.splice(0).reverse()) undo()
  await server?.close()
  server = undefined
})

describe('the API key', () => {
  it('appears in no event, error message, error detail or console output — even when the server echoes it back', async () => {
    // A server that echoes the Authorization header into its error bodies (some proxies do).
    server = await startModelServer((request, index) => {
      const echoed = String(request.headers.authorization)
      if (index === 0) return answer(['fine'])
      if (index === 1) return callTools([{ id: 'c', name: 'add', arguments: `{"a":1,"b":2,"note":"${echoed}"}` }])
      if (index === 2) return { kind: 'error', status: 400, message: `bad request from ${echoed}`, type: `invalid_request_error ${echoed}` }
      if (index === 3) return { kind: 'error', status: 401, message: `invalid key ${echoed}`, type: 'authentication_error' }
      return { kind: 'error', status: 429, message: `slow down ${echoed}`, headers: { 'retry-after': '0' } }
    })
    const { client } = testClient(server.baseURL)
    const session = newStore().create()
    const outcomes = []
    outcomes.push(await runAgent({ client, session, prompt: 'one', tools: [addTool], signal: new AbortController().signal }))
    outcomes.push(await runAgent({ client, session, prompt: 'two', tools: [addTool], signal: new AbortController().signal }))
    outcomes.push(await runAgent({ client, session, prompt: 'three', tools: [], signal: new AbortController().signal }))
    outcomes.push(await runAgent({ client, session, prompt: 'four', tools: [], signal: new AbortController().signal }))

    // Every request did carry the key: the test would be vacuous otherwise.
    expect(server.requests.every((request) => request.headers.authorization === `Bearer ${TEST_KEY}`)).toBe(true)
    const errors = outcomes.flatMap((outcome) => (outcome.error === undefined ? [] : [outcome.error as DriverOpenAIError]))
    expect(errors.map((error) => error.code)).toEqual([
      'DRIVER_OPENAI_BAD_REQUEST',
      'DRIVER_OPENAI_UNAUTHORIZED',
      'DRIVER_OPENAI_RATE_LIMITED',
    ])
    expect(errors[0]!.message).toContain('bad request from Bearer [redacted]')

    // Even the echo inside the model's tool arguments is redacted before it reaches the log.
    const everything = [
      JSON.stringify(session.events),
      ...errors.flatMap((error) => [
        error.message,
        String(error),
        error.stack ?? '',
        JSON.stringify(error),
        JSON.stringify(error.details ?? {}),
      ]),
      JSON.stringify(client),
      ...captured,
    ].join('\n')
    expect(everything).not.toContain(TEST_KEY)
  })

  it('is not in the error when the server cannot be reached or the key is missing', async () => {
    const client = createModelClient({
      baseURL: 'http://127.0.0.1:9/v1',
      apiKey: TEST_KEY,
      env: {},
      retry: { maxAttempts: 2, backoff: async () => {} },
    })
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })
    expect((outcome.error as DriverOpenAIError).code).toBe('DRIVER_OPENAI_CONNECTION')
    expect((outcome.error as DriverOpenAIError).message).toMatch(/^Could not reach the model server after 2 attempts: .*Check --base-url/)
    let missing: unknown
    try {
      createModelClient({ env: { OPENAI_LOG: 'debug' } })
    } catch (error) {
      missing = error
    }
    expect(missing).toMatchObject({ code: 'DRIVER_OPENAI_NO_API_KEY' })
    expect([JSON.stringify(session.events), String(outcome.error), ...captured].join('\n')).not.toContain(TEST_KEY)
  })
})
