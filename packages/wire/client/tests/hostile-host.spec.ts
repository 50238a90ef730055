import { describe, expect, it } from 'vitest'
import { createClient, type StreamEventBody } from '../src/index.js'
import { failure } from './failure.js'
import { localServers } from './local-server.js'

// Real HTTP servers that answer the way a hostile or broken host would.
// Verdicts are counts of requests and bytes, never durations.

const { serve } = localServers()

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

/** A host that answers `status` with `total` bytes of `fill`, counting what it wrote and whether the client hung up. */
async function floodingHost(status: number, contentType: string, total: number, fill = ' ') {
  const state = { written: 0, closed: 0, requests: 0 }
  const chunk = Buffer.alloc(64 * 1024, fill)
  const url = await serve((_req, res) => {
    state.requests++
    let done = false
    res.on('close', () => {
      done = true
      state.closed++
    })
    res.writeHead(status, { 'Content-Type': contentType })
    let sent = 0
    const pump = (): void => {
      while (!done && sent < total) {
        sent += chunk.length
        state.written += chunk.length
        if (!res.write(chunk)) {
          res.once('drain', pump)
          return
        }
      }
      if (!done) res.end()
    }
    pump()
  })
  return { url, state }
}

describe('answer size', () => {
  const bound = 1024 * 1024

  it('refuses a JSON answer past maxResponseBytes after reading at most the bound plus one chunk, and hangs up', async () => {
    const { url, state } = await floodingHost(200, 'application/json', 16 * bound)
    const counting = countingFetch()
    const client = createClient({ baseUrl: url, token: 'secret-token-0123456789', fetch: counting.fetch, maxResponseBytes: bound })
    const error = await failure(client.listSessions())
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_RESPONSE_TOO_LARGE', status: 200 })
    expect(error.message).not.toContain('secret-token')
    expect(counting.seen.bytes).toBeGreaterThan(bound)
    expect(counting.seen.bytes).toBeLessThanOrEqual(bound + counting.seen.largestChunk)
    await expect.poll(() => state.closed, { timeout: 120_000 }).toBe(1)
    expect(state.written).toBeLessThan(16 * bound)
  })

  it('bounds error pages too: a flood of HTML on a JSON call and on a stream is refused with its status', async () => {
    const { url, state } = await floodingHost(502, 'text/html', 16 * bound, '<')
    const counting = countingFetch()
    const client = createClient({ baseUrl: url, token: 't', fetch: counting.fetch, maxResponseBytes: bound })
    expect((await failure(client.history('p'))).toJSON()).toMatchObject({ code: 'CLIENT_RESPONSE_TOO_LARGE', status: 502 })
    const iterate = async () => {
      for await (const _event of client.stream('p')) void _event
    }
    expect((await failure(iterate())).toJSON()).toMatchObject({ code: 'CLIENT_RESPONSE_TOO_LARGE', status: 502 })
    expect(counting.seen.bytes).toBeLessThanOrEqual(2 * (bound + counting.seen.largestChunk))
    await expect.poll(() => state.closed, { timeout: 120_000 }).toBe(2)
  })

  it('refuses a declared Content-Length past the bound without reading, and takes an answer of exactly the bound', async () => {
    const page = JSON.stringify({ sessions: [] })
    let declared = 0
    const url = await serve((_req, res) => {
      const body = page.padEnd(declared, ' ')
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) })
      res.end(body)
    })
    const counting = countingFetch()
    const client = createClient({ baseUrl: url, token: 't', fetch: counting.fetch, maxResponseBytes: 4096 })
    declared = 4097
    expect((await failure(client.listSessions())).code).toBe('CLIENT_RESPONSE_TOO_LARGE')
    expect(counting.seen.bytes).toBe(0)
    declared = 4096
    expect(await client.listSessions()).toEqual({ sessions: [] })
    expect(() => createClient({ baseUrl: url, token: 't', maxResponseBytes: 0.5 })).toThrow(
      expect.objectContaining({ code: 'CLIENT_INVALID_ARGUMENT' }),
    )
  })
})

describe('hostile answers', () => {
  it('delivers the events that came before a malformed one in the same chunk, then fails typed', async () => {
    const host = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' })
      res.end(
        'event: ready\ndata: {"sessionId":"p"}\n\n' +
          'event: catalog\ndata: {"sessionId":"p","parentId":"p","childId":"c","reason":"disposed"}\n\n' +
          'event: catalog\ndata: not json\n\n' +
          'event: ready\ndata: {"sessionId":"late"}\n\n',
      )
    })
    const events: string[] = []
    const error = await failure(
      (async () => {
        for await (const event of createClient({ baseUrl: host, token: 't' }).stream('p')) events.push(event.event)
      })(),
    )
    expect(error.code).toBe('CLIENT_INVALID_RESPONSE')
    expect(events).toEqual(['ready', 'catalog'])
  })

  it('stops following a listing whose pages do not advance (an empty page or the same cursor again)', async () => {
    const header = { version: 1, id: 's', createdAt: 1, isSeeded: false, delegationDepth: 0 }
    const entry = { header, inheritedEventCount: 0, live: false, persisted: true, title: null, tokens: null, cost: null }
    let requests = 0
    let sessions: unknown[] = []
    const host = await serve((_req, res) => {
      requests++
      res.writeHead(200, { 'Content-Type': 'application/json' })
      res.end(JSON.stringify({ sessions, nextCursor: 'same' }))
    })
    const client = createClient({ baseUrl: host, token: 't' })
    const drain = async () => {
      const seen: unknown[] = []
      for await (const record of client.sessions()) seen.push(record)
      return seen
    }
    expect((await failure(drain())).code).toBe('CLIENT_INVALID_RESPONSE')
    expect(requests).toBe(1)
    sessions = [entry]
    requests = 0
    expect((await failure(drain())).code).toBe('CLIENT_INVALID_RESPONSE')
    expect(requests).toBe(2)
  })

  it('refuses a token no HTTP header can carry at creation, without quoting it', async () => {
    for (const token of ['secret-token-0123\r\nX-Injected: 1', '\nsecret-token-0123', 'secret-tökén-€']) {
      let error: unknown
      try {
        createClient({ baseUrl: 'http://127.0.0.1:1', token })
      } catch (caught) {
        error = caught
      }
      expect(error).toMatchObject({ code: 'CLIENT_INVALID_ARGUMENT' })
      expect((error as Error).message).not.toContain('secret')
    }
    // Trailing whitespace (a token read from a file) is trimmed by fetch and sent as the bare token.
    const sent: Array<string | undefined> = []
    const host = await serve((req, res) => {
      sent.push(req.headers.authorization)
      res.writeHead(200, { 'Content-Type': 'application/json' })
      res.end(emptyPage)
    })
    await createClient({ baseUrl: host, token: 'secret-token-0123\n' }).listSessions()
    expect(sent).toEqual(['Bearer secret-token-0123'])
  })
})
