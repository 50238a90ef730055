import { afterEach, describe, expect, it } from 'vitest'
import { type DriverOpenAIError, fetchWithBoundedErrors, runAgent } from '../src/index.js'
import { ERROR_BODY_MAX_BYTES, ERROR_TEXT_MAX_CHARS } from '../src/limits.js'
import { type FloodReply, type ModelServer, type Reply, startModelServer } from '../src/testing/model-server.js'
import { newStore, testClient } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const FLOOD_BYTES = 64 * 1024 * 1024
/** Far below the flood, far above the bound plus what the sockets on either side buffer. */
const STOPPED_BELOW = FLOOD_BYTES / 4
const HEAD = '{"error":{"type":"server_error","message":"'

const flood = (status: number, headers: Record<string, string> = {}): FloodReply => ({
  kind: 'flood',
  status,
  headers,
  head: HEAD,
  bytes: FLOOD_BYTES,
})

/** Posts a Chat body to the test server through the bounded fetch, as the SDK does. */
function post(base: string): Promise<Response> {
  return fetchWithBoundedErrors(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [] }),
  })
}

describe('an error answer with a huge body', () => {
  it('the client hands on at most ERROR_BODY_MAX_BYTES of it, keeps status, status text and headers, and cancels the rest', async () => {
    server = await startModelServer([flood(503, { 'retry-after': '7' })])
    const response = await post(server.baseURL)
    expect(response.status).toBe(503)
    expect(response.ok).toBe(false)
    expect(response.statusText).toBe('Service Unavailable')
    expect(response.headers.get('retry-after')).toBe('7')
    const text = await response.text()
    expect(text).toHaveLength(ERROR_BODY_MAX_BYTES)
    expect(text.startsWith(`${HEAD}xxx`)).toBe(true)
    const outcome = await server.flooded(1)
    expect(outcome.complete).toBe(false)
    expect(outcome.written).toBeLessThan(STOPPED_BELOW)
  })

  it('a status past 599, which a Response cannot be built with, keeps its status and is bounded too', async () => {
    server = await startModelServer([flood(600)])
    const response = await post(server.baseURL)
    expect(response.status).toBe(600)
    expect(response.ok).toBe(false)
    expect(await response.text()).toHaveLength(ERROR_BODY_MAX_BYTES)
    expect((await server.flooded(1)).complete).toBe(false)
  })

  it('a 2xx body is passed on whole, however far past the bound', async () => {
    const body = 'y'.repeat(ERROR_BODY_MAX_BYTES * 3)
    server = await startModelServer([{ kind: 'raw', contentType: 'text/plain', body: [body] }])
    const response = await post(server.baseURL)
    expect(response.status).toBe(200)
    expect(await response.text()).toBe(body)
  })

  it('an error body within the bound is handed on whole', async () => {
    server = await startModelServer([{ kind: 'error', status: 418, message: 'short and whole' }])
    const response = await post(server.baseURL)
    expect(JSON.parse(await response.text())).toMatchObject({ error: { message: 'short and whole' } })
  })

  it('the driver: a 500 (retried after its retry-after) then a 400, each read only to the bound, end the turn DRIVER_OPENAI_BAD_REQUEST', async () => {
    const replies: Reply[] = [flood(500, { 'retry-after': '3' }), flood(400)]
    server = await startModelServer(replies)
    const { client, waits } = testClient(server.baseURL)
    const session = newStore().create()
    const outcome = await runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal })
    const error = outcome.error as DriverOpenAIError
    expect(error.code).toBe('DRIVER_OPENAI_BAD_REQUEST')
    expect(server.requests).toHaveLength(2)
    expect(waits).toEqual([{ attempt: 1, retryAfterMs: 3_000 }])
    // The server's text is shown, cut short: the message is far below even the bound.
    expect(error.message).toContain(`(HTTP 400): 400 ${HEAD}xxx`)
    const shown = error.message.slice(error.message.indexOf('(HTTP 400): ') + '(HTTP 400): '.length)
    expect(shown).toBe(`${`400 ${HEAD}${'x'.repeat(ERROR_TEXT_MAX_CHARS)}`.slice(0, ERROR_TEXT_MAX_CHARS)}…`)
    for (const nth of [1, 2]) {
      const flooded = await server.flooded(nth)
      expect(flooded.complete).toBe(false)
      expect(flooded.written).toBeLessThan(STOPPED_BELOW)
    }
    expect(session.events.at(-2)).toMatchObject({ type: 'assistant/error', data: { code: 'DRIVER_OPENAI_BAD_REQUEST' } })
  })
})
