import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient, type StreamEventBody } from '../src/index.js'
import { failure } from './failure.js'

// Real HTTP servers that answer the way a hostile or broken host would.
// Verdicts are counts of requests and bytes, never durations.

const servers: Server[] = []

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler)
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

const emptyPage = JSON.stringify({ sessions: [] })

describe('redirects', () => {
  it('refuses a redirect to another origin: the other origin gets no request and never sees the token', async () => {
    const elsewhere: Array<string | undefined> = []
    const other = await serve((req, res) => {
      elsewhere.push(req.headers.authorization)
      res.writeHead(200, { 'Content-Type': 'application/json' })
      res.end(emptyPage)
    })
    const host = await serve((_req, res) => {
      res.writeHead(302, { Location: `${other}/api/sessions` })
      res.end()
    })
    const error = await failure(createClient({ baseUrl: host, token: 'secret-token-0123456789' }).listSessions())
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_REDIRECT_REFUSED', status: 302 })
    expect(error.message).toContain(`another origin (${other})`)
    expect(error.message).not.toContain('secret-token')
    expect(elsewhere).toEqual([])
  })

  it('refuses a same-origin redirect as well (the dsh host never redirects) and a redirected stream', async () => {
    let requests = 0
    const host = await serve((req, res) => {
      requests++
      res.writeHead(req.url?.startsWith('/moved') ? 200 : 307, { Location: '/moved', 'Content-Type': 'application/json' })
      res.end(emptyPage)
    })
    const client = createClient({ baseUrl: host, token: 't' })
    expect((await failure(client.listSessions())).toJSON()).toMatchObject({ code: 'CLIENT_REDIRECT_REFUSED', status: 307 })
    const iterate = async () => {
      for await (const _event of client.stream('p')) void _event
    }
    expect((await failure(iterate())).code).toBe('CLIENT_REDIRECT_REFUSED')
    expect(requests).toBe(2)
  })
})

/** A fetch that counts the body bytes the client pulled and, optionally, re-chunks them. */
function countingFetch(split?: (chunk: Uint8Array) => Uint8Array[]) {
  const seen = { bytes: 0, largestChunk: 0, chunks: [] as string[] }
  const wrapped: typeof fetch = async (input, init) => {
    const response = await fetch(input, init)
    if (response.body === null) return response
    const counted = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          for (const piece of split ? split(chunk) : [chunk]) {
            seen.bytes += piece.length
            seen.largestChunk = Math.max(seen.largestChunk, piece.length)
            if (split) seen.chunks.push(new TextDecoder().decode(piece))
            controller.enqueue(piece)
          }
        },
      }),
    )
    return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers })
  }
  return { fetch: wrapped, seen }
}

describe('event stream reading', () => {
  it('ends a 32 MB line without a newline after at most the bound plus one chunk, with a typed error', async () => {
    const total = 32 * 1024 * 1024
    const chunk = Buffer.alloc(64 * 1024, 'a')
    let written = 0
    let closed = false
    const host = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' })
      res.on('close', () => (closed = true))
      const pump = (): void => {
        while (!closed && written < total) {
          written += chunk.length
          if (!res.write(written === chunk.length ? Buffer.concat([Buffer.from('data: '), chunk]) : chunk)) {
            res.once('drain', pump)
            return
          }
        }
        if (!closed) res.end()
      }
      pump()
    })
    const bound = 1024 * 1024
    const counting = countingFetch()
    const client = createClient({ baseUrl: host, token: 't', fetch: counting.fetch, maxEventSize: bound })
    const events: StreamEventBody[] = []
    const error = await failure(
      (async () => {
        for await (const event of client.stream('p')) events.push(event)
      })(),
    )
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_STREAM_TOO_LARGE', status: 200 })
    expect(events).toEqual([])
    // The parser held no more than the bound: the client stopped pulling within one chunk past it.
    expect(counting.seen.bytes).toBeGreaterThan(bound)
    expect(counting.seen.bytes).toBeLessThanOrEqual(bound + 'data: '.length + counting.seen.largestChunk)
    // And it hung up: the host could not push the whole 32 MB.
    await expect.poll(() => closed, { timeout: 120_000 }).toBe(true)
    expect(written).toBeLessThan(total)
  })

  it('keeps `event:` when a \\r\\n line ending is split across chunks', async () => {
    const text =
      'retry: 2000\r\n\r\nid: 1\r\nevent: ready\r\ndata: {"sessionId":"p"}\r\n\r\n' +
      'event: catalog\r\ndata: {"sessionId":"p","parentId":"p","childId":"c","reason":"disposed"}\r\n\r\n'
    const host = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' })
      res.end(text)
    })
    // Cut every chunk right after each CR, so each CRLF arrives as "…\r" + "\n…".
    const counting = countingFetch((chunk) => {
      const pieces: Uint8Array[] = []
      let start = 0
      for (let i = 0; i < chunk.length; i++) {
        if (chunk[i] === 13) {
          pieces.push(chunk.subarray(start, i + 1))
          start = i + 1
        }
      }
      if (start < chunk.length) pieces.push(chunk.subarray(start))
      return pieces
    })
    const events: StreamEventBody[] = []
    for await (const event of createClient({ baseUrl: host, token: 't', fetch: counting.fetch }).stream('p')) events.push(event)
    expect(counting.seen.chunks.filter((piece) => piece.endsWith('\r')).length).toBe(text.split('\r').length - 1)
    expect(events).toEqual([
      { event: 'ready', data: { sessionId: 'p' } },
      { event: 'catalog', data: { sessionId: 'p', parentId: 'p', childId: 'c', reason: 'disposed' } },
    ])
  })

  it('refuses a bad maxEventSize at creation', () => {
    expect(() => createClient({ baseUrl: 'http://127.0.0.1:1', token: 't', maxEventSize: 0 })).toThrow(
      expect.objectContaining({ code: 'CLIENT_INVALID_ARGUMENT' }),
    )
  })
})
