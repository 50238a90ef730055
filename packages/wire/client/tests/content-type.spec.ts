import type { ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { createClient, type StreamEventBody } from '../src/index.js'
import { failure } from './failure.js'
import { localServers } from './local-server.js'

// Real HTTP servers whose answers a proxy has rewritten: header names and
// media types in another case, parameters spaced or quoted differently, a
// charset label, no Content-Type at all. Header names are sent exactly as
// written here (node:http keeps the case given to writeHead).

const { serve } = localServers()

const header = { version: 1, id: 's', createdAt: 1, isSeeded: false, delegationDepth: 0 }
const entry = { header, inheritedEventCount: 0, live: false, persisted: true, title: 'café', tokens: null, cost: null }
const listing = JSON.stringify({ sessions: [entry] })
const ready = 'event: ready\ndata: {"sessionId":"p"}\n\n'
const catalog = 'event: catalog\ndata: {"sessionId":"p","parentId":"p","childId":"é","reason":"disposed"}\n\n'

/** A host answering every request with `status`, these headers (names as written) and these body bytes. */
async function answering(state: { status: number; headers: Record<string, string>; body: Buffer }): Promise<string> {
  return serve((_req, res) => {
    res.writeHead(state.status, state.headers)
    res.end(state.body)
  })
}

async function drain(events: AsyncIterable<StreamEventBody>): Promise<StreamEventBody[]> {
  const seen: StreamEventBody[] = []
  for await (const event of events) seen.push(event)
  return seen
}

/** A fetch that hands the client its body one byte per chunk, so every multi-byte character is split. */
const byteByByte: typeof fetch = async (input, init) => {
  const response = await fetch(input, init)
  if (response.body === null) return response
  const split = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        for (let i = 0; i < chunk.length; i++) controller.enqueue(chunk.subarray(i, i + 1))
      },
    }),
  )
  return new Response(split, { status: response.status, statusText: response.statusText, headers: response.headers })
}

describe('content types compared case-insensitively, parameters ignored', () => {
  it('reads JSON answers whatever the case, spacing and charset label of their content type', async () => {
    const state = { status: 200, headers: {} as Record<string, string>, body: Buffer.from(listing) }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    for (const type of [
      'Application/JSON; Charset=UTF-8',
      'APPLICATION/JSON',
      'application/json ; charset="utf-8"',
      'application/json;charset=UTF-8',
      // JSON is UTF-8 whatever the label says (RFC 8259): a mislabelled answer is still read as UTF-8.
      'application/json; charset=ISO-8859-1',
    ]) {
      state.headers = { 'CONTENT-TYPE': type }
      expect(
        (await client.listSessions()).sessions.map((record) => record.title),
        type,
      ).toEqual(['café'])
    }
    state.headers = {}
    expect((await client.listSessions()).sessions).toHaveLength(1)
  })

  it('passes typed error bodies through whatever the case of their content type, and without one', async () => {
    const body = Buffer.from(JSON.stringify({ code: 'SESSION_QUERY_NOT_FOUND', message: 'Session "x" was not found.' }))
    const state = { status: 404, headers: {} as Record<string, string>, body }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    for (const headers of [{ 'Content-Type': 'Application/JSON; Charset=UTF-8' }, { 'content-type': 'TEXT/PLAIN' }, {}]) {
      state.headers = headers
      const expected = { code: 'SESSION_QUERY_NOT_FOUND', status: 404, message: 'Session "x" was not found.' }
      expect((await failure(client.history('x'))).toJSON(), JSON.stringify(headers)).toEqual(expected)
      expect((await failure(drain(client.stream('x')))).toJSON(), JSON.stringify(headers)).toEqual(expected)
    }
    // No content type and no typed body: the status still comes back.
    state.status = 503
    state.body = Buffer.from('overloaded')
    expect((await failure(client.history('x'))).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 503 })
  })

  it('reads an event stream whatever the case, spacing and charset label of its content type', async () => {
    const state = { status: 200, headers: {} as Record<string, string>, body: Buffer.from(ready + catalog) }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    for (const type of [
      'Text/Event-Stream; Charset=UTF-8',
      'TEXT/EVENT-STREAM',
      'text/event-stream ;charset=utf-8',
      'text/event-stream;\tcharset="UTF-8"',
      'text/event-stream; charset=windows-1252',
    ]) {
      state.headers = { 'CONTENT-TYPE': type }
      expect(
        (await drain(client.stream('p'))).map((event) => event.data),
        type,
      ).toEqual([{ sessionId: 'p' }, { sessionId: 'p', parentId: 'p', childId: 'é', reason: 'disposed' }])
    }
  })

  it('refuses a stream answer that is not an event stream, naming what it got', async () => {
    const state = { status: 200, headers: {} as Record<string, string>, body: Buffer.from(ready) }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    const cases: Array<[Record<string, string>, string]> = [
      [{}, 'no content type'],
      [{ 'Content-Type': 'text/event-streams' }, '"text/event-streams"'],
      [{ 'Content-Type': 'Text/Plain; profile=text/event-stream' }, '"text/plain"'],
      [{ 'Content-Type': 'application/json' }, '"application/json"'],
    ]
    for (const [headers, named] of cases) {
      state.headers = headers
      const error = await failure(drain(client.stream('p')))
      expect(error.toJSON(), named).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 200 })
      expect(error.message).toContain(named)
    }
  })
})

describe('header names in any case', () => {
  it('reads Content-Length, Location and Content-Type sent in upper case', async () => {
    let mode: 'length' | 'redirect' = 'length'
    const url = await serve((_req, res) => {
      if (mode === 'redirect') res.writeHead(302, { LOCATION: 'http://elsewhere.invalid/api/sessions' })
      else res.writeHead(200, { 'CONTENT-TYPE': 'APPLICATION/JSON', 'CONTENT-LENGTH': '5000' })
      res.end(mode === 'redirect' ? '' : '{"sessions":[]}'.padEnd(5000, ' '))
    })
    const client = createClient({ baseUrl: url, token: 't', maxResponseBytes: 4096 })
    const tooLarge = await failure(client.listSessions())
    expect(tooLarge.code).toBe('CLIENT_RESPONSE_TOO_LARGE')
    expect(tooLarge.message).toContain('4096 bytes')
    mode = 'redirect'
    expect((await failure(client.listSessions())).message).toContain('another origin (http://elsewhere.invalid)')
  })
})

describe('encoded answers', () => {
  // gzip at level 0 stores the bytes as they are, so the encoded body (and its
  // Content-Length) is longer than the decoded one the bound applies to.
  const stored = (text: string) => gzipSync(Buffer.from(text), { level: 0 })

  it('bounds the decoded bytes, not a gzip answer’s Content-Length: a listing of exactly maxResponseBytes is read', async () => {
    const text = listing.padEnd(4096 - (Buffer.byteLength(listing) - listing.length), ' ')
    expect(Buffer.byteLength(text)).toBe(4096)
    const body = stored(text)
    expect(body.length).toBeGreaterThan(4096)
    const url = await answering({
      status: 200,
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip', 'Content-Length': String(body.length) },
      body,
    })
    const page = await createClient({ baseUrl: url, token: 't', maxResponseBytes: 4096 }).listSessions()
    expect(page.sessions.map((s) => s.title)).toEqual(['café'])
  })

  it('refuses a gzip answer that decodes past maxResponseBytes, though its Content-Length is small', async () => {
    const body = gzipSync(Buffer.from(listing.padEnd(64 * 1024, ' ')))
    expect(body.length).toBeLessThan(4096)
    const url = await answering({
      status: 200,
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip', 'Content-Length': String(body.length) },
      body,
    })
    const error = await failure(createClient({ baseUrl: url, token: 't', maxResponseBytes: 4096 }).listSessions())
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_RESPONSE_TOO_LARGE', status: 200 })
  })
})

describe('charsets', () => {
  it('refuses a JSON answer that is not UTF-8, naming the charset it declares', async () => {
    const state = {
      status: 200,
      headers: { 'Content-Type': 'application/json; Charset="ISO-8859-1"' },
      body: Buffer.from(listing, 'latin1'),
    }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    const error = await failure(client.listSessions())
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 200 })
    expect(error.message).toContain('not valid UTF-8')
    expect(error.message).toContain('charset "ISO-8859-1"')
    state.headers = { 'Content-Type': 'application/json' }
    expect((await failure(client.listSessions())).message).toContain('declares no charset')
  })

  it('still reports the status and the typed code of an error answer that is not UTF-8', async () => {
    const state = {
      status: 502,
      headers: { 'Content-Type': 'text/html; charset=windows-1252' },
      body: Buffer.from('<p>\u201cbad gateway\u201d</p>', 'latin1'),
    }
    const client = createClient({ baseUrl: await answering(state), token: 't' })
    expect((await failure(client.listSessions())).toJSON()).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 502 })
    state.status = 409
    state.headers = { 'Content-Type': 'application/json; charset=ISO-8859-1' }
    state.body = Buffer.from(JSON.stringify({ code: 'SESSION_PERSISTENCE_LOCKED', message: 'Locked by café.' }), 'latin1')
    expect((await failure(client.compact('x'))).toJSON()).toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED', status: 409 })
  })

  it('fails an event stream that turns out not to be UTF-8, after delivering the events before it', async () => {
    let open: ServerResponse | undefined
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=ISO-8859-1' })
      res.write(ready)
      open = res
    })
    const seen: string[] = []
    const error = await failure(
      (async () => {
        for await (const event of createClient({ baseUrl: url, token: 't' }).stream('p')) {
          seen.push(event.event)
          // The bad bytes are sent only once the event before them has been delivered.
          if (event.event === 'ready') open?.end(Buffer.from(catalog, 'latin1'))
        }
      })(),
    )
    expect(error.toJSON()).toMatchObject({ code: 'CLIENT_INVALID_RESPONSE', status: 200 })
    expect(error.message).toContain('charset "ISO-8859-1"')
    expect(seen).toEqual(['ready'])
  })

  it('reads multi-byte characters split across chunks in JSON answers and event streams', async () => {
    let stream = false
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': stream ? 'text/event-stream' : 'application/json' })
      res.end(stream ? catalog : listing)
    })
    const client = createClient({ baseUrl: url, token: 't', fetch: byteByByte })
    expect((await client.listSessions()).sessions[0]?.title).toBe('café')
    stream = true
    expect((await drain(client.stream('p'))).map((event) => event.data)).toEqual([
      { sessionId: 'p', parentId: 'p', childId: 'é', reason: 'disposed' },
    ])
  })
})
