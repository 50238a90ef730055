import { readFileSync, writeFileSync } from 'node:fs'
import { Context } from '@dsh/context'
import { errorBody, historyPage, searchPage, sessionListPage, streamEvent, subagentList } from '@dsh/protocol'
import { SessionId } from '@dsh/session'
import type { SessionListFilter } from '@dsh/session-query'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiServer } from '../src/index.js'
import { rawRequest } from './support/raw-http.js'
import { SseReader } from './support/sse.js'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'

// The HTTP API over real services (store, persistence + coordinator,
// projections, query corpus, subagent runtime with its scripted driver) on a
// real server bound to 127.0.0.1, port 0.

let stack: Stack

beforeAll(async () => {
  stack = await startStack()
  const { sessions, subagents, gates } = stack
  const parent = sessions.create({ id: 'parent', cwd: '/work/project' })
  turn(parent, 'plan the work')
  const other = sessions.create({ id: 'other' })
  turn(other, 'unrelated')
  await subagents.spawn(parent, { mode: 'one-shot', label: 'summarizer', context: 'fresh', prompt: 'summarize', id: 'child-a' }).done
  gates.hold('child-b')
  const b = subagents.spawn(parent, { mode: 'continuable', label: 'researcher', context: 'fork', prompt: 'research', id: 'child-b' })
  await subagents.spawn(b.session, { mode: 'one-shot', context: 'fresh', prompt: 'dig deeper', id: 'grandchild' }).done
  await subagents.spawn(other, { mode: 'one-shot', label: 'keeper', context: 'fresh', prompt: 'secret words', id: 'child-x' }).done
  turn(sessions.create({ id: '../evil' }), 'hello from ../evil')
  await sessions.flush(parent)
})

afterAll(async () => {
  stack.gates.release('child-b')
  await stack.close()
})

const enc = encodeURIComponent

describe('server options', () => {
  it('fails at creation, with typed codes, on missing services, weak tokens, bad ports and taken ports', async () => {
    await expect(createApiServer({ ctx: new Context(), token: TOKEN })).rejects.toMatchObject({ code: 'API_SERVICE_UNAVAILABLE' })
    await expect(createApiServer({ ctx: stack.ctx, token: 'short' })).rejects.toMatchObject({ code: 'API_INVALID_OPTIONS' })
    await expect(createApiServer({ ctx: stack.ctx, token: TOKEN, port: 70_000 })).rejects.toMatchObject({ code: 'API_INVALID_OPTIONS' })
    await expect(createApiServer({ ctx: stack.ctx, token: TOKEN, port: stack.server.port })).rejects.toMatchObject({
      code: 'API_LISTEN_FAILED',
    })
    await expect(createApiServer({ ctx: stack.ctx, token: TOKEN, limits: { maxStreams: 0 } })).rejects.toMatchObject({
      code: 'API_INVALID_OPTIONS',
    })
  })

  it('binds 127.0.0.1 by default and closes idempotently', async () => {
    expect(stack.server.host).toBe('127.0.0.1')
    expect(stack.server.url).toBe(`http://127.0.0.1:${stack.server.port}`)
    const extra = await createApiServer({ ctx: stack.ctx, token: TOKEN })
    const open = await SseReader.open(`${extra.url}/api/sessions/parent/stream?token=${TOKEN}`)
    await open.next((e) => e.event === 'ready')
    await Promise.all([extra.close(), extra.close()])
    await expect(fetch(`${extra.url}/api/sessions`)).rejects.toThrow()
  })
})

describe('authentication', () => {
  const routes = [
    '/api/sessions',
    '/api/sessions/parent/history',
    '/api/sessions/parent/subagents',
    '/api/sessions/parent/subagents/child-a/history',
    '/api/search?q=hello',
    '/api/sessions/parent/stream',
    '/',
    '/api/no-such-route',
  ]

  it('answers 401 API_UNAUTHORIZED without the token, with a wrong one, and with nothing else in the body', async () => {
    for (const path of routes) {
      for (const token of [null, 'wrong-token-0123456789abcdef']) {
        const { status, body, headers } = await stack.get(path, { token })
        expect([path, status]).toEqual([path, 401])
        expect(errorBody.strict().parse(body).code).toBe('API_UNAUTHORIZED')
        expect(headers.get('www-authenticate')).toBe('Bearer')
      }
    }
  })

  it('takes ?token= on the page and the stream only', async () => {
    expect((await stack.get(`/?token=${TOKEN}`, { token: null })).status).toBe(200)
    expect((await stack.get(`/api/sessions?token=${TOKEN}`, { token: null })).status).toBe(401)
    const stream = await SseReader.open(`${stack.server.url}/api/sessions/parent/stream?token=${TOKEN}`)
    expect(stream.status).toBe(200)
    stream.close()
  })

  it('serves the page script and stylesheet without the token (they hold no data)', async () => {
    const script = await stack.get('/app.js', { token: null })
    expect(script.status).toBe(200)
    expect(script.headers.get('content-type')).toContain('text/javascript')
    expect((await stack.get('/app.css', { token: null })).status).toBe(200)
  })
})

describe('sessions', () => {
  it('pages through the whole corpus with cursors, in createdAt then id order', async () => {
    const all = sessionListPage.parse((await stack.get('/api/sessions?limit=1000')).body).sessions.map((r) => r.header.id)
    expect(all).toEqual(expect.arrayContaining(['parent', 'other', 'child-a', 'child-b', 'grandchild', 'child-x', '../evil']))
    const paged: string[] = []
    let cursor: string | undefined
    do {
      const page = sessionListPage.parse(
        (await stack.get(`/api/sessions?limit=3${cursor === undefined ? '' : `&cursor=${enc(cursor)}`}`)).body,
      )
      expect(page.sessions.length).toBeLessThanOrEqual(3)
      paged.push(...page.sessions.map((r) => r.header.id))
      cursor = page.nextCursor
    } while (cursor !== undefined)
    expect(paged).toEqual(all)
  })

  it('filters by parent, origin, cwd and createdAt', async () => {
    const ids = async (query: string) =>
      sessionListPage.parse((await stack.get(`/api/sessions?${query}`)).body).sessions.map((r) => r.header.id)
    expect(await ids('parentSession=parent&origin=subagent')).toEqual(['child-a', 'child-b'])
    expect(await ids('parentSession=child-b')).toEqual(['grandchild'])
    expect(await ids(`cwd=${enc('/work/project')}&origin=subagent`)).toEqual(['child-a', 'child-b', 'grandchild'])
    expect(await ids('createdFrom=0&createdTo=1')).toEqual([])
  })

  it('refuses bad filters with typed 400s', async () => {
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=abc',
      'origin=human',
      'cursor=not-a-cursor',
      'createdFrom=-5',
      'colour=red',
      'limit=1&limit=2',
    ]) {
      const { status, body } = await stack.get(`/api/sessions?${query}`)
      expect([query, status]).toEqual([query, 400])
      expect(errorBody.parse(body).code).toMatch(/^(API_BAD_REQUEST|SESSION_QUERY_INVALID_CURSOR)$/)
    }
  })

  it('serves history pages of a top-level session', async () => {
    const whole = historyPage.parse((await stack.get('/api/sessions/parent/history?limit=1000')).body)
    expect(whole.events.slice(0, 4).map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/message', 'turn/end'])
    expect(whole.total).toBe(whole.events.length)
    const page = historyPage.parse((await stack.get('/api/sessions/parent/history?limit=2')).body)
    expect(page.header.id).toBe('parent')
    expect(page.events).toEqual(whole.events.slice(-2))
    expect(page.nextBefore).toBe(whole.total - 2)
    const earlier = historyPage.parse((await stack.get('/api/sessions/parent/history?before=2&limit=10')).body)
    expect(earlier.events.map((e) => e.seq)).toEqual([0, 1])
    expect(earlier.nextBefore).toBeUndefined()
  })

  it('passes query service errors through with their code', async () => {
    const { status, body } = await stack.get('/api/sessions/nobody/history')
    expect(status).toBe(404)
    expect(errorBody.parse(body).code).toBe('SESSION_QUERY_NOT_FOUND')
  })
})

describe('owner checks', () => {
  const noEventData = (body: unknown, ...secrets: string[]) => {
    expect(Object.keys(body as object).sort()).toEqual(['code', 'message'])
    const text = JSON.stringify(body)
    for (const secret of secrets) expect(text).not.toContain(secret)
  }

  it("refuses a subagent's history on the direct route with a typed 403 and no events", async () => {
    const { status, body } = await stack.get('/api/sessions/child-a/history')
    expect(status).toBe(403)
    expect(errorBody.parse(body).code).toBe('API_FORBIDDEN')
    noEventData(body, 'finished summarize', 'working on')
  })

  it("serves a child's history through its parent's catalog", async () => {
    const page = historyPage.parse((await stack.get('/api/sessions/parent/subagents/child-a/history')).body)
    expect(page.header).toMatchObject({ id: 'child-a', origin: 'subagent', parentSession: 'parent' })
    expect(page.events.some((e) => e.type === 'assistant/message' && (e.data as { text: string }).text === 'finished summarize')).toBe(true)
    const grand = historyPage.parse((await stack.get('/api/sessions/child-b/subagents/grandchild/history')).body)
    expect(grand.header.parentSession).toBe('child-b')
  })

  it('answers a typed 404 with no event data for a wrong parent, a grandparent, a non-subagent and a missing child', async () => {
    const cases = [
      ['/api/sessions/other/subagents/child-a/history', 'finished summarize'],
      ['/api/sessions/parent/subagents/child-x/history', 'secret words'],
      ['/api/sessions/parent/subagents/grandchild/history', 'dig deeper'],
      ['/api/sessions/parent/subagents/other/history', 'unrelated'],
      ['/api/sessions/parent/subagents/nobody/history', 'working on'],
    ] as const
    for (const [path, secret] of cases) {
      const { status, body } = await stack.get(path)
      expect([path, status]).toEqual([path, 404])
      expect(errorBody.parse(body).code).toBe('API_NOT_FOUND')
      noEventData(body, secret, 'working on')
    }
  })
})

describe('owner checks read one row', () => {
  it('the direct history route and a child route look the session up by id: one listing of one row, with 40 cold subagents in the store', async () => {
    const calls: { filter: SessionListFilter | undefined; records: number }[] = []
    const counted = await startStack({
      backend: 'disk',
      wrap: (services) => ({
        ...services,
        sessionQuery: {
          ...services.sessionQuery,
          async listSessions(filter, signal) {
            const page = await services.sessionQuery.listSessions(filter, signal)
            calls.push({ filter, records: page.records.length })
            return page
          },
          observeSession: (id, signal) => services.sessionQuery.observeSession(id, signal),
          readHistory: (id, request, signal) => services.sessionQuery.readHistory(id, request, signal),
          readWindow: (id, request, signal) => services.sessionQuery.readWindow(id, request, signal),
        },
      }),
    })
    try {
      const parent = counted.sessions.create({ id: 'parent' })
      turn(parent, 'own work')
      for (let i = 0; i < 40; i++) {
        const child = counted.sessions.create({ id: `sub-${i}`, origin: 'subagent', parentSession: 'parent', delegationDepth: 1 })
        turn(child, `part ${i}`)
        await counted.sessions.dispose(child.id)
      }
      await counted.sessions.dispose('parent')

      calls.length = 0
      expect((await counted.get('/api/sessions/parent/history')).status).toBe(200)
      expect(calls).toEqual([{ filter: { origin: 'subagent', ids: ['parent'] }, records: 0 }])

      calls.length = 0
      expect((await counted.get('/api/sessions/sub-7/history')).status).toBe(403)
      expect(calls).toEqual([{ filter: { origin: 'subagent', ids: ['sub-7'] }, records: 1 }])

      calls.length = 0
      expect((await counted.get('/api/sessions/parent/subagents/sub-7/history')).status).toBe(200)
      expect(calls[0]).toEqual({ filter: { parentSession: 'parent', origin: 'subagent', ids: ['sub-7'] }, records: 1 })
      expect(calls.every((call) => call.filter?.ids !== undefined || call.filter?.parentSession !== undefined)).toBe(true)
    } finally {
      await counted.close()
    }
  })
})

describe('owner re-check after the read', () => {
  it('refuses a child replaced under another parent between the listing and the read', async () => {
    // The query service is wrapped so that, right after the route's catalog
    // check and before its read, the child is deleted and republished under
    // the same id as a subagent of another parent (real persistence operations).
    let swapped = false
    let readParent: string | undefined
    const replaced = await startStack({
      wrap: (services) => ({
        ...services,
        sessionQuery: {
          ...services.sessionQuery,
          listSessions: (filter, signal) => services.sessionQuery.listSessions(filter, signal),
          observeSession: (id, signal) => services.sessionQuery.observeSession(id, signal),
          readWindow: (id, request, signal) => services.sessionQuery.readWindow(id, request, signal),
          async readHistory(id, request, signal) {
            if (id === 'swapped' && !swapped) {
              swapped = true
              await replaced.persistence.delete(SessionId(id))
              await replaced.subagents.spawn('intruder', {
                mode: 'one-shot',
                label: 'impostor',
                context: 'fresh',
                prompt: 'intruder secret',
                id,
              }).done
            }
            const page = await services.sessionQuery.readHistory(id, request, signal)
            readParent = page.header.parentSession
            return page
          },
        },
      }),
    })
    try {
      const owner = replaced.sessions.create({ id: 'owner' })
      turn(owner, 'own work')
      turn(replaced.sessions.create({ id: 'intruder' }), 'other work')
      await replaced.subagents.spawn(owner, { mode: 'one-shot', context: 'fresh', prompt: 'original', id: 'swapped' }).done
      expect((await replaced.get('/api/sessions/owner/subagents/swapped/history')).status).toBe(404)
      expect(swapped).toBe(true)
      // The read succeeded and returned the new lifecycle; the route refused it on the observed header.
      expect(readParent).toBe('intruder')
      const { status, body } = await replaced.get('/api/sessions/owner/subagents/swapped/history')
      expect(status).toBe(404)
      expect(JSON.stringify(body)).not.toContain('intruder secret')
      const real = await replaced.get('/api/sessions/intruder/subagents/swapped/history')
      expect(real.status).toBe(200)
      expect(JSON.stringify(real.body)).toContain('intruder secret')
    } finally {
      await replaced.close()
    }
  })
})

describe('subagent catalog', () => {
  it('lists direct children with their identity and activity', async () => {
    const list = subagentList.parse((await stack.get('/api/sessions/parent/subagents')).body)
    expect(list.scope).toBe('children')
    expect(list.rows).toEqual([
      {
        kind: 'child',
        id: 'child-a',
        activity: 'inactive',
        hasChildren: false,
        mode: 'one-shot',
        label: 'summarizer',
        parentId: 'parent',
        depth: 1,
        rung: 3,
        tokens: expect.any(Number),
        durationMs: expect.any(Number),
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        closed: false,
      },
      {
        kind: 'child',
        id: 'child-b',
        activity: 'running',
        hasChildren: true,
        mode: 'continuable',
        label: 'researcher',
        parentId: 'parent',
        depth: 1,
        rung: 1,
        tokens: expect.any(Number),
        durationMs: expect.any(Number),
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        closed: false,
      },
    ])
  })

  it('lists descendants in pre-order with parent and depth', async () => {
    const list = subagentList.parse((await stack.get('/api/sessions/parent/subagents?scope=descendants')).body)
    expect(list.rows.map((r) => [r.id, r.parentId, r.depth])).toEqual([
      ['child-a', 'parent', 1],
      ['child-b', 'parent', 1],
      ['grandchild', 'child-b', 2],
    ])
  })

  it('refuses an unknown scope', async () => {
    const { status, body } = await stack.get('/api/sessions/parent/subagents?scope=everything')
    expect(status).toBe(400)
    expect(errorBody.parse(body).code).toBe('API_BAD_REQUEST')
  })
})

describe('bodies and methods', () => {
  it('refuses a declared oversized body with 413 before reading it', async () => {
    const response = await rawRequest(
      stack.server.url,
      `GET /api/sessions HTTP/1.1\r\nHost: ${new URL(stack.server.url).host}\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`,
      '{"padding":"',
    )
    expect(response.status).toBe(413)
    expect(response.headers.connection).toBe('close')
    expect(errorBody.parse(JSON.parse(response.body)).code).toBe('API_PAYLOAD_TOO_LARGE')
  })

  it('answers Expect: 100-continue with the 413 itself, before the body, when the declared body is over the limit', async () => {
    const response = await rawRequest(
      stack.server.url,
      `POST /api/sessions HTTP/1.1\r\nHost: ${new URL(stack.server.url).host}\r\nAuthorization: Bearer ${TOKEN}\r\nExpect: 100-continue\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`,
    )
    // A 100 Continue first would be the status the raw reader sees.
    expect(response.status).toBe(413)
    expect(errorBody.parse(JSON.parse(response.body)).code).toBe('API_PAYLOAD_TOO_LARGE')
    const small = await rawRequest(
      stack.server.url,
      `GET /api/sessions HTTP/1.1\r\nHost: ${new URL(stack.server.url).host}\r\nAuthorization: Bearer ${TOKEN}\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\n`,
      '{}',
    )
    expect(small.status).toBe(100)
    expect(small.body).toContain('200 OK')
  })

  it('refuses an oversized chunked body with 413, also without the token', async () => {
    const chunk = Buffer.alloc(32 * 1024, 'a')
    const chunked = Buffer.concat(
      [0, 1, 2]
        .flatMap(() => [Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])
        .concat(Buffer.from('0\r\n\r\n')),
    )
    const response = await rawRequest(
      stack.server.url,
      `POST /api/sessions HTTP/1.1\r\nHost: ${new URL(stack.server.url).host}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      chunked,
    )
    expect(response.status).toBe(413)
    expect(errorBody.parse(JSON.parse(response.body)).code).toBe('API_PAYLOAD_TOO_LARGE')
  })

  it('answers other methods with a typed 405', async () => {
    const response = await fetch(`${stack.server.url}/api/sessions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}` },
      body: '{}',
    })
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe('GET, HEAD')
    expect(errorBody.parse(await response.json()).code).toBe('API_METHOD_NOT_ALLOWED')
  })

  it('names what a page file takes when a query parameter comes with it: the page the token, its public files nothing', async () => {
    const onPage = await fetch(`${stack.server.url}/?token=${TOKEN}&x=1`)
    expect(onPage.status).toBe(400)
    expect(errorBody.parse(await onPage.json()).message).toBe('Unknown query parameter "x"; this page takes none but the token.')
    const onScript = await fetch(`${stack.server.url}/app.js?token=${TOKEN}`)
    expect(onScript.status).toBe(400)
    expect(errorBody.parse(await onScript.json()).message).toBe('Unknown query parameter "token"; /app.js takes no query parameters.')
  })

  it('answers HEAD as GET without the body', async () => {
    const headers = { Authorization: `Bearer ${TOKEN}` }
    const got = await fetch(`${stack.server.url}/api/sessions`, { headers })
    const head = await fetch(`${stack.server.url}/api/sessions`, { method: 'HEAD', headers })
    expect(head.status).toBe(200)
    expect(head.headers.get('content-type')).toBe(got.headers.get('content-type'))
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(await got.text())))
    expect(await head.text()).toBe('')
    expect((await fetch(`${stack.server.url}/api/sessions`, { method: 'HEAD' })).status).toBe(401)
  })
})

describe('search', () => {
  it('answers a typed 501 when the query backend has no index, and 400 without text', async () => {
    const { status, body } = await stack.get('/api/search?q=hello&kind=events')
    expect(status).toBe(501)
    expect(errorBody.parse(body).code).toBe('API_SEARCH_UNAVAILABLE')
    expect((await stack.get('/api/search?q=%20')).status).toBe(400)
  })
})

describe('on disk: JSONL files, SQLite index and cache', () => {
  let disk: Stack

  beforeAll(async () => {
    disk = await startStack({ backend: 'disk' })
    const parent = disk.sessions.create({ id: 'parent' })
    turn(parent, 'alpha bravo')
    for (let i = 0; i < 5; i++) turn(disk.sessions.create({ id: `bravo-${i}` }), `bravo number ${i}`)
    await disk.subagents.spawn(parent, { mode: 'continuable', label: 'forky', context: 'fork', prompt: 'bravo child', id: 'forked' }).done
    for (const session of disk.sessions.list()) await disk.sessions.flush(session)
  })

  afterAll(async () => {
    await disk.close()
  })

  it('searches sessions and events with cursors', async () => {
    // A cursor names the index generation it was issued at: the index this host writes may still take in
    // the fixture's last changes between two pages (answered from the logs until then), and a client told
    // SESSION_QUERY_STALE_CURSOR runs the search again from its first page, as the error says. Bounded: an
    // index that moved on every page would fail this test.
    const pages = async (): Promise<string[] | 'stale'> => {
      const first = searchPage.parse((await disk.get('/api/search?q=bravo&limit=2')).body)
      expect(first.kind).toBe('sessions')
      expect(first.hits).toHaveLength(2)
      const ids = first.kind === 'sessions' ? first.hits.map((h) => h.record.header.id) : []
      let cursor = first.nextCursor
      while (cursor !== undefined) {
        const { status, body } = await disk.get(`/api/search?q=bravo&limit=2&cursor=${enc(cursor)}`)
        if (status === 409 && errorBody.parse(body).code === 'SESSION_QUERY_STALE_CURSOR') return 'stale'
        const page = searchPage.parse(body)
        if (page.kind === 'sessions') ids.push(...page.hits.map((h) => h.record.header.id))
        cursor = page.nextCursor
      }
      return ids
    }
    let ids = await pages()
    for (let attempt = 1; ids === 'stale' && attempt < 3; attempt++) ids = await pages()
    if (ids === 'stale') throw new Error('every search from its first page met a stale cursor')
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids).toEqual(expect.arrayContaining(['parent', 'bravo-0', 'bravo-4']))
    const events = searchPage.parse((await disk.get('/api/search?q=alpha&kind=events')).body)
    expect(events.kind === 'events' ? events.hits.map((h) => h.id) : []).toContain('parent')
    const stale = await disk.get('/api/search?q=bravo&cursor=garbage')
    expect(stale.status).toBe(400)
  })

  it('passes a corrupt log through as a typed 422 without event data', async () => {
    await disk.sessions.dispose('bravo-3')
    const path = disk.disk!.persistence.logPath('bravo-3')
    const bytes = readFileSync(path)
    const at = Math.floor(bytes.length * 0.6)
    bytes[at] = bytes[at]! ^ 0xff
    writeFileSync(path, bytes)
    const { status, body } = await disk.get(`/api/sessions/bravo-3/history`)
    expect(status).toBe(422)
    expect(errorBody.parse(body).code).toBe('SESSION_QUERY_CORRUPT_SESSION')
    expect(JSON.stringify(body)).not.toContain('bravo number 3')
  })
})

describe('event stream', () => {
  it("pushes the session's projection changes and catalog notices for its subagents", async () => {
    const stream = await SseReader.open(`${stack.server.url}/api/sessions/parent/stream`, { Authorization: `Bearer ${TOKEN}` })
    expect(stream.status).toBe(200)
    expect(stream.contentType).toContain('text/event-stream')
    expect(streamEvent.parse(await stream.next()).event).toBe('ready')

    const parent = stack.sessions.get('parent')!
    turn(parent, 'another step')
    // Every registered unit's change is pushed: usage (sessionStats) as well as the subagent units.
    const keyed = (key: string) => (e: { event: string; data: unknown }) =>
      e.event === 'projection' && (e.data as { key: string }).key === key
    const stats = streamEvent.parse(await stream.next(keyed('sessionStats')))
    expect(stats.data).toMatchObject({ sessionId: 'parent', key: 'sessionStats' })
    const projection = streamEvent.parse(await stream.next(keyed('subagentTiming')))
    expect(projection.data).toMatchObject({ sessionId: 'parent', key: 'subagentTiming' })

    stack.gates.hold('child-c')
    const child = stack.subagents.spawn(parent, { mode: 'one-shot', label: 'late', context: 'fresh', prompt: 'late work', id: 'child-c' })
    const created = streamEvent.parse(
      await stream.next((e) => e.event === 'catalog' && (e.data as { childId: string }).childId === 'child-c'),
    )
    expect(created.data).toEqual({ sessionId: 'parent', parentId: 'parent', childId: 'child-c', reason: 'created' })
    // The child's own stream never carries its projection views: child data travels only through the parent's routes.
    const childStream = await SseReader.open(`${stack.server.url}/api/sessions/child-c/stream?token=${TOKEN}`)
    await childStream.next((e) => e.event === 'ready')
    stack.gates.release('child-c')
    await child.done
    await stream.next((e) => e.event === 'catalog' && (e.data as { reason: string }).reason === 'turn-end')
    await stream.next((e) => e.event === 'catalog' && (e.data as { reason: string }).reason === 'disposed')
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(childStream.events.map((e) => e.event)).toEqual(['ready'])
    childStream.close()
    // Child events never travel on the parent's stream as projection payloads.
    expect(
      stream.events.filter((e) => e.event === 'projection').every((e) => (e.data as { sessionId: string }).sessionId === 'parent'),
    ).toBe(true)
    expect(JSON.stringify(stream.events)).not.toContain('late work')
    stream.close()
  })

  it('tells an ancestor stream about grandchildren of live subagents', async () => {
    const stream = await SseReader.open(`${stack.server.url}/api/sessions/parent/stream`, { Authorization: `Bearer ${TOKEN}` })
    await stream.next((e) => e.event === 'ready')
    const childB = stack.sessions.get('child-b')!
    await stack.subagents.spawn(childB, { mode: 'one-shot', context: 'fresh', prompt: 'more', id: 'grandchild-2' }).done
    const notice = await stream.next((e) => e.event === 'catalog' && (e.data as { childId: string }).childId === 'grandchild-2')
    expect(notice.data).toMatchObject({ sessionId: 'parent', parentId: 'child-b' })
    stream.close()
  })

  it('refuses streams beyond the limit with a typed 503', async () => {
    const limited = await startStack({ limits: { maxStreams: 1 } })
    try {
      const first = await SseReader.open(`${limited.server.url}/api/sessions/x/stream?token=${TOKEN}`)
      expect(first.status).toBe(200)
      const second = await limited.get('/api/sessions/x/stream')
      expect(second.status).toBe(503)
      expect(errorBody.parse(second.body).code).toBe('API_TOO_MANY_STREAMS')
      first.close()
    } finally {
      await limited.close()
    }
  })

  it('answers HEAD on a stream with its head at once, taking no stream slot', async () => {
    const limited = await startStack({ limits: { maxStreams: 1 } })
    try {
      for (let i = 0; i < 3; i++) {
        const head = await fetch(`${limited.server.url}/api/sessions/x/stream`, {
          method: 'HEAD',
          headers: { Authorization: `Bearer ${TOKEN}` },
        })
        expect(head.status).toBe(200)
        expect(head.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
        expect(await head.text()).toBe('')
      }
      const stream = await SseReader.open(`${limited.server.url}/api/sessions/x/stream?token=${TOKEN}`)
      expect(stream.status).toBe(200)
      await stream.next((e) => e.event === 'ready')
      stream.close()
    } finally {
      await limited.close()
    }
  })
})
