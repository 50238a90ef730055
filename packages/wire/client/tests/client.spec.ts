import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, isClientError } from '../src/index.js'
import { failure } from './failure.js'

// A real HTTP server that answers each request the way the current test
// scripts it, to see how the client treats answers a real host would never
// give (the full-stack behaviour is covered by client.e2e.spec.ts).
type Answer = (req: IncomingMessage, res: ServerResponse) => void
let answer: Answer = (_req, res) => res.end()
const seen: Array<{ method: string | undefined; url: string; authorization: string | undefined; accept: string | undefined }> = []
let server: Server
let baseUrl: string

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ method: req.method, url: req.url ?? '', authorization: req.headers.authorization, accept: req.headers.accept })
    answer(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

const json =
  (status: number, body: unknown): Answer =>
  (_req, res) => {
    res.writeHead(status, { 'Content-Type': 'application/json' })
    res.end(typeof body === 'string' ? body : JSON.stringify(body))
  }

const header = { version: 1, id: 'p', createdAt: 1, isSeeded: false, delegationDepth: 0 }

describe('createClient', () => {
  it('sends the bearer token and one percent-encoded path segment per id', async () => {
    answer = json(200, { header: { ...header, id: 'a/b?c' }, inheritedEventCount: 0, events: [], total: 0 })
    const client = createClient({ baseUrl, token: 'secret-token-0123456789' })
    const page = await client.history('a/b?c', { before: 5, limit: 2 })
    expect(page.header.id).toBe('a/b?c')
    const request = seen.at(-1)!
    expect(request.url).toBe('/api/sessions/a%2Fb%3Fc/history?before=5&limit=2')
    expect(request.authorization).toBe('Bearer secret-token-0123456789')
    expect(request.accept).toBe('application/json')
  })

  it('compact POSTs with no body, keep in the query, and validates the answer; a LOCKED refusal comes back typed', async () => {
    const result = { id: 'a/b', compactionId: 'c1', from: 1, to: 9, shadowed: 6, tokensBefore: 900, tokensAfter: 120 }
    let body = ''
    answer = (req, res) => {
      req.on('data', (chunk: Buffer) => (body += chunk.toString()))
      req.on('end', () => json(200, result)(req, res))
    }
    const client = createClient({ baseUrl, token: 'secret-token-0123456789' })
    expect(await client.compact('a/b', { keep: 2 })).toEqual(result)
    expect(seen.at(-1)).toMatchObject({ method: 'POST', url: '/api/sessions/a%2Fb/compact?keep=2', accept: 'application/json' })
    expect(body).toBe('')
    await client.compact('plain')
    expect(seen.at(-1)).toMatchObject({ method: 'POST', url: '/api/sessions/plain/compact' })
    expect((await failure(client.compact('x', { keep: -1 }))).code).toBe('CLIENT_INVALID_ARGUMENT')

    answer = json(409, { code: 'SESSION_PERSISTENCE_LOCKED', message: 'Session "x" is being written by process 7.' })
    expect((await failure(client.compact('x'))).toJSON()).toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED', status: 409 })
    answer = json(200, { ...result, shadowed: -1 })
    expect((await failure(client.compact('x'))).code).toBe('CLIENT_INVALID_RESPONSE')
  })

  it('passes typed server errors through with their status', async () => {
    answer = json(404, { code: 'SESSION_QUERY_NOT_FOUND', message: "Session 'x' was not found." })
    const error = await failure(createClient({ baseUrl, token: 't' }).history('x'))
    expect(error.toJSON()).toEqual({ code: 'SESSION_QUERY_NOT_FOUND', status: 404, message: "Session 'x' was not found." })
    expect(isClientError(error, 'SESSION_QUERY_NOT_FOUND')).toBe(true)
  })

  it('refuses answers that do not match the schema', async () => {
    const client = createClient({ baseUrl, token: 't' })
    answer = json(200, 'not json {')
    expect((await failure(client.listSessions())).code).toBe('CLIENT_INVALID_RESPONSE')
    answer = json(200, { sessions: [{ header: { ...header, version: 9 }, inheritedEventCount: 0, live: true, persisted: true }] })
    const mismatch = await failure(client.listSessions())
    expect(mismatch.code).toBe('CLIENT_INVALID_RESPONSE')
    expect(mismatch.message).toContain('sessions.0.header.version')
    answer = json(200, {
      parentId: 'p',
      scope: 'children',
      rows: [{ kind: 'child', id: 'c', activity: 'inactive', hasChildren: false, mode: 'continuable', parentId: 'p', depth: 1, rung: 1 }],
    })
    expect((await failure(client.subagents('p'))).code).toBe('CLIENT_INVALID_RESPONSE')
    answer = json(502, '<html>bad gateway</html>')
    expect((await failure(client.listSessions())).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 502 })
    answer = json(200, { kind: 'sessions', hits: [] })
    expect((await failure(client.search({ q: 'x', kind: 'events' }))).code).toBe('CLIENT_INVALID_RESPONSE')
  })

  it('refuses ids fetch would rewrite, without sending anything', async () => {
    const client = createClient({ baseUrl, token: 't' })
    const before = seen.length
    for (const id of ['', '.', '..']) {
      expect((await failure(client.history(id))).code).toBe('CLIENT_INVALID_ARGUMENT')
      expect((await failure(client.childHistory('p', id))).code).toBe('CLIENT_INVALID_ARGUMENT')
    }
    expect(seen.length).toBe(before)
    expect(() => createClient({ baseUrl: 'ftp://x', token: 't' })).toThrow(expect.objectContaining({ code: 'CLIENT_INVALID_ARGUMENT' }))
    expect(() => createClient({ baseUrl: 'not a url', token: 't' })).toThrow(expect.objectContaining({ code: 'CLIENT_INVALID_ARGUMENT' }))
  })

  it('reports CANCELLED for an aborted call and CLIENT_NETWORK when nobody answers', async () => {
    answer = () => {}
    const controller = new AbortController()
    const pending = createClient({ baseUrl, token: 't' }).listSessions({}, { signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    expect((await failure(pending)).code).toBe('CANCELLED')
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const error = await failure(createClient({ baseUrl: `http://127.0.0.1:${port}`, token: 't' }).listSessions())
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_NETWORK', status: 0 })
  })

  it('parses the event stream across chunk boundaries and skips unknown events', async () => {
    answer = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' })
      const text =
        'retry: 2000\n\n: keep-alive\n\nid: 1\nevent: ready\ndata: {"sessionId":"p"}\n\n' +
        'event: future-kind\ndata: {"x":1}\n\n' +
        'id: 2\r\nevent: catalog\r\ndata: {"sessionId":"p","parentId":"p","childId":"c","reason":"disposed"}\r\n\r\n'
      let i = 0
      const timer = setInterval(() => {
        res.write(text.slice(i, i + 7))
        i += 7
        if (i >= text.length) {
          clearInterval(timer)
          res.end()
        }
      }, 1)
    }
    const events = []
    for await (const event of createClient({ baseUrl, token: 't' }).stream('p')) events.push(event)
    expect(events).toEqual([
      { event: 'ready', data: { sessionId: 'p' } },
      { event: 'catalog', data: { sessionId: 'p', parentId: 'p', childId: 'c', reason: 'disposed' } },
    ])
    expect(seen.at(-1)?.accept).toBe('text/event-stream')
  })

  it('refuses stream events that do not match the schema', async () => {
    answer = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' })
      res.end('event: catalog\ndata: {"sessionId":"p","reason":"exploded"}\n\n')
    }
    const iterate = async () => {
      for await (const _event of createClient({ baseUrl, token: 't' }).stream('p')) void _event
    }
    expect((await failure(iterate())).code).toBe('CLIENT_INVALID_RESPONSE')
  })
})
