import { errorBody } from '@dsh/protocol'
import { HTTP_RETRY_AFTER_SECONDS } from '@dsh/protocol/limits'
import { afterEach, describe, expect, it } from 'vitest'
import type { ApiLimits } from '../src/index.js'
import { RawConnection, type RawResponse } from './support/raw-http.js'
import { type Stack, startStack, TOKEN } from './support/stack.js'

// How many connections the host holds and for how long, over real sockets on
// 127.0.0.1. Every client here keeps its own side open (half-open allowed),
// so a connection that goes away is the server's doing, and the server's own
// count of open connections shows it let the socket go. Verdicts are answers
// and counts; the small timeouts only keep the waits short.

let stack: Stack | undefined
const clients: RawConnection[] = []

async function serve(limits: Partial<ApiLimits>): Promise<Stack> {
  stack = await startStack({ limits })
  stack.sessions.create({ id: 'parent' })
  return stack
}

function open(): RawConnection {
  const client = new RawConnection(stack!.server.url)
  clients.push(client)
  return client
}

/** Waits until the server's own count of open connections is `count` (the test timeout is the deadline). */
async function connectionsReach(count: number): Promise<void> {
  while (stack!.server.connections !== count) await new Promise((resolve) => setTimeout(resolve, 5))
}

function expectRefusal(response: RawResponse, status: number, code: string): void {
  expect(response.status).toBe(status)
  expect(response.headers.connection).toBe('close')
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  const body = errorBody.parse(JSON.parse(response.body))
  expect(body.code).toBe(code)
  expect(body.message.length).toBeGreaterThan(0)
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.socket.destroy()
  await stack?.close()
  stack = undefined
})

describe('slow clients', () => {
  it('a client that sends part of a request line or of its headers and stalls gets 408 API_REQUEST_TIMEOUT, and the server lets the socket go', async () => {
    await serve({ headersTimeoutMs: 100, requestTimeoutMs: 200 })
    const silent = open()
    const partLine = open()
    partLine.socket.write('GET /api/sess')
    const partHeaders = open()
    partHeaders.socket.write(`GET /api/sessions HTTP/1.1\r\nHost: ${new URL(stack!.server.url).host}\r\nAuthori`)
    for (const client of [silent, partLine, partHeaders]) {
      expectRefusal(await client.response(), 408, 'API_REQUEST_TIMEOUT')
      await client.ended
    }
    // The clients still hold their side open: the server destroyed its sockets rather than leaving them half-open.
    await connectionsReach(0)
    expect(clients.every((client) => !client.socket.destroyed)).toBe(true)
  })
})

describe('idle connections', () => {
  it('an idle keep-alive connection is closed by the server after the idle timeout, not at once', async () => {
    const idleTimeoutMs = 200
    await serve({ idleTimeoutMs })
    const client = open()
    // The request goes out before the server can answer it, so the server's close comes about the idle timeout after this or
    // later (half of it allows for timer rounding); a server that closed at once would come sooner.
    const sent = performance.now()
    client.get('/api/sessions', { Authorization: `Bearer ${TOKEN}` })
    const response = await client.response()
    expect(response.status).toBe(200)
    expect(response.headers.connection).toBe('keep-alive')
    await client.ended
    expect(performance.now() - sent).toBeGreaterThanOrEqual(idleTimeoutMs / 2)
    await connectionsReach(0)
    client.socket.end()
    await client.closed
  })
})

describe('the connection cap', () => {
  it('with maxConnections N, connection N+1 gets 503 API_TOO_MANY_CONNECTIONS with Retry-After and is closed; the first N are served', async () => {
    const cap = 3
    await serve({ maxConnections: cap, idleTimeoutMs: 600_000 })
    const auth = { Authorization: `Bearer ${TOKEN}` }
    const held = Array.from({ length: cap }, () => open())
    for (const client of held) {
      client.get('/api/sessions', auth)
      expect((await client.response()).status).toBe(200)
    }
    expect(stack!.server.connections).toBe(cap)

    const extra = open()
    extra.get('/api/sessions', auth)
    const refusal = await extra.response()
    expectRefusal(refusal, 503, 'API_TOO_MANY_CONNECTIONS')
    expect(refusal.headers['retry-after']).toBe(String(HTTP_RETRY_AFTER_SECONDS))
    await extra.ended
    await connectionsReach(cap)

    // The first N are still served, on the connections they hold.
    for (const client of held) {
      client.get('/api/sessions', auth)
      expect((await client.response()).status).toBe(200)
    }
    // One of them leaves: its place is free for a newcomer.
    held[0]!.socket.end()
    await held[0]!.closed
    await connectionsReach(cap - 1)
    const next = open()
    next.get('/api/sessions', auth)
    expect((await next.response()).status).toBe(200)

    for (const client of [...held, next]) client.socket.end()
    await connectionsReach(0)
  })
})
