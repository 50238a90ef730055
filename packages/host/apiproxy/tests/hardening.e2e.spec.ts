import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { Context } from '@dsh/context'
import { errorBody, SEARCH_MAX_TERMS, SEARCH_MAX_TEXT, SEARCH_PAGE_MAX_LIMIT, searchPage } from '@dsh/protocol'
import type { SearchRequest } from '@dsh/session-query'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiproxyPlugin, createApiServer, listenApi } from '../src/index.js'
import { rawRequest } from './support/raw-http.js'
import { type Stack, startStack, TOKEN, turn, withQuery } from './support/stack.js'

// Attacks on the HTTP host (a forged Host header, probing a corrupt child past
// the owner check, error bodies that leak paths, oversized searches), each
// reproduced over real HTTP on the real on-disk stack (zstd JSONL files,
// SQLite index and cache).

/** What an error body must never carry: the root's path, file names, byte offsets, errno codes. */
function expectPathFree(body: unknown, root: string): void {
  const text = JSON.stringify(body)
  expect(Object.keys(body as object).sort()).toEqual(['code', 'message'])
  expect(text).not.toContain(root)
  expect(text).not.toMatch(/log\.jsonl|\.zst|byte \d|offset \d|\bE[A-Z]{3,}\b|errno/)
}

/** A stack with a parent, a subagent whose log body is corrupt, and a session whose log will become a directory. */
async function damagedStack(query: 'sqlite' | 'memory', searched: SearchRequest[] = []): Promise<Stack> {
  const stack = await startStack({
    backend: 'disk',
    query,
    wrap: (services) =>
      withQuery(services, (sessionQuery) =>
        sessionQuery.searchSessions === undefined
          ? {}
          : {
              searchSessions: (request: SearchRequest, signal?: AbortSignal) => {
                searched.push(request)
                return sessionQuery.searchSessions!(request, signal)
              },
            },
      ),
  })
  const parent = stack.sessions.create({ id: 'parent' })
  turn(parent, 'the plan')
  const other = stack.sessions.create({ id: 'other' })
  turn(other, 'unrelated')
  await stack.subagents.spawn(parent, {
    mode: 'one-shot',
    label: 'broken',
    context: 'fresh',
    prompt: 'the secret child words',
    id: 'corrupt-child',
  }).done
  turn(stack.sessions.create({ id: 'damaged' }), 'soon unreadable')
  for (const session of stack.sessions.list()) await stack.sessions.flush(session)
  for (const id of ['corrupt-child', 'damaged']) if (stack.sessions.get(id)) await stack.sessions.dispose(id)
  // Flip a byte at the end of the child's last data frame, just before its trailer (skippable frame
  // 0x184D2A5D): its header frame stays readable, so it is still listed, and the newest history page,
  // which reads only the batches that hold it, reads that batch.
  const path = stack.disk!.persistence.logPath('corrupt-child')
  const bytes = readFileSync(path)
  const trailer = bytes.lastIndexOf(Buffer.from([0x5d, 0x2a, 0x4d, 0x18]))
  if (trailer < 2) throw new Error('corrupt-child has no batch trailer to aim at')
  const at = trailer - 2
  bytes[at] = bytes[at]! ^ 0xff
  writeFileSync(path, bytes)
  return stack
}

let disk: Stack
const searched: SearchRequest[] = []

beforeAll(async () => {
  disk = await damagedStack('sqlite', searched)
})

afterAll(async () => {
  await disk.close()
})

describe('Host header (DNS rebinding)', () => {
  const request = (host: string | undefined, target = '/api/sessions') =>
    rawRequest(
      disk.server.url,
      `GET ${target} HTTP/1.1\r\n${host === undefined ? '' : `Host: ${host}\r\n`}Authorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
    )

  it('answers Host: attacker.example with 421 before anything else, even with the right token and on public assets', async () => {
    const port = disk.server.port
    for (const [host, target] of [
      ['attacker.example', '/api/sessions'],
      [`attacker.example:${port}`, '/api/sessions'],
      [`attacker.example:${port}`, '/app.css'],
      [`127.0.0.1:${port + 1}`, '/api/sessions'],
      [`localhost.attacker.example:${port}`, '/api/sessions/parent/history'],
      [`127.0.0.1.nip.io:${port}`, '/api/sessions'],
    ] as const) {
      const response = await request(host, target)
      expect([host, target, response.status]).toEqual([host, target, 421])
      expect(errorBody.parse(JSON.parse(response.body)).code).toBe('API_MISDIRECTED_REQUEST')
      expect(response.body).not.toContain('the plan')
    }
    // Without Host, HTTP/1.0 and HTTP/1.1 alike reach the check: a typed 421, never node:http's bare 400.
    for (const version of ['1.0', '1.1']) {
      const noHost = await rawRequest(
        disk.server.url,
        `GET /api/sessions HTTP/${version}\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
      )
      expect([version, noHost.status]).toEqual([version, 421])
      expect(errorBody.parse(JSON.parse(noHost.body)).code).toBe('API_MISDIRECTED_REQUEST')
    }
  })

  it('accepts the loopback names with the bound port', async () => {
    const port = disk.server.port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      expect([host, (await request(host)).status]).toEqual([host, 200])
    }
  })

  it('accepts a configured name, and refuses to listen on a name the handler would refuse', async () => {
    const named = await createApiServer({ ctx: disk.ctx, token: TOKEN, allowedHosts: ['dsh.internal'] })
    try {
      const response = await rawRequest(
        named.url,
        `GET /api/sessions HTTP/1.1\r\nHost: dsh.internal:${named.port}\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
      )
      expect(response.status).toBe(200)
    } finally {
      await named.close()
    }
    const ctx = new Context()
    ctx.provide('sessionQuery', disk.ctx.require('sessionQuery'))
    ctx.provide('subagents', disk.subagents)
    await ctx.activate(apiproxyPlugin({ token: TOKEN }))
    await expect(listenApi(ctx.require('httpApi'), { host: 'dsh.internal' })).rejects.toMatchObject({ code: 'API_INVALID_OPTIONS' })
    await ctx.dispose()
  })
})

describe.each(['sqlite', 'memory'] as const)('over the %s query backend', (query) => {
  let stack: Stack
  beforeAll(async () => {
    stack = await damagedStack(query)
  })
  afterAll(async () => {
    await stack.close()
  })

  describe("a corrupt subagent's history", () => {
    it('is refused by the owner check before any read: 403 on the direct route, 404 through another parent, no log body read', async () => {
      const reads = stack.persistence.metrics.bodyReads
      const direct = await stack.get('/api/sessions/corrupt-child/history')
      expect(direct.status).toBe(403)
      expect(errorBody.parse(direct.body).code).toBe('API_FORBIDDEN')
      expectPathFree(direct.body, stack.disk!.root)
      const wrongParent = await stack.get('/api/sessions/other/subagents/corrupt-child/history')
      expect(wrongParent.status).toBe(404)
      expect(errorBody.parse(wrongParent.body).code).toBe('API_NOT_FOUND')
      expectPathFree(wrongParent.body, stack.disk!.root)
      expect(stack.persistence.metrics.bodyReads).toBe(reads)
    })

    it('answers its own parent a path-free 422 and logs the details instead', async () => {
      const logged = stack.logs.length
      const { status, body } = await stack.get('/api/sessions/parent/subagents/corrupt-child/history')
      expect(status).toBe(422)
      expect(errorBody.parse(body).code).toBe('SESSION_QUERY_CORRUPT_SESSION')
      expect(errorBody.parse(body).message).toContain("Session 'corrupt-child' is damaged")
      expectPathFree(body, stack.disk!.root)
      expect(JSON.stringify(body)).not.toContain('secret child words')
      const entry = stack.logs.slice(logged).find((log) => log.message.includes('SESSION_QUERY_CORRUPT_SESSION'))
      expect((entry?.error as Error | undefined)?.message).toContain('corrupt')
    })
  })

  describe('a damaged entry', () => {
    it('answers as a damaged entry (422), without errno or path, when its log is a directory', async () => {
      const path = stack.disk!.persistence.logPath('damaged')
      rmSync(path)
      mkdirSync(path)
      const { status, body } = await stack.get('/api/sessions/damaged/history')
      const { code } = errorBody.parse(body)
      // Persistence reports a directory where a log should be as a damaged entry (a root tolerates one bad entry).
      expect({ status, code }).toEqual({ status: 422, code: 'SESSION_QUERY_CORRUPT_SESSION' })
      expectPathFree(body, stack.disk!.root)
    })
  })
})

describe('search limits', () => {
  it('hands the backend distinct terms only: "the" 249 times is one term', async () => {
    const before = searched.length
    const { status, body } = await disk.get(`/api/search?q=${Array.from({ length: 249 }, () => 'the').join('+')}`)
    expect(status).toBe(200)
    expect(searchPage.parse(body).kind).toBe('sessions')
    expect(searched.slice(before).map((request) => request.text)).toEqual(['the'])
  })

  it('refuses more distinct terms, longer text or larger pages than the protocol allows, before the backend sees them', async () => {
    const before = searched.length
    const words = Array.from({ length: SEARCH_MAX_TERMS + 1 }, (_, i) => `word${i}`)
    const cases = [
      [`q=${words.join('+')}`, `at most ${SEARCH_MAX_TERMS}`],
      [`q=${'a'.repeat(SEARCH_MAX_TEXT + 1)}`, `longer than ${SEARCH_MAX_TEXT}`],
      [`q=plan&limit=${SEARCH_PAGE_MAX_LIMIT + 1}`, `from 1 to ${SEARCH_PAGE_MAX_LIMIT}`],
      ['q=%20%2C%21', 'no word'],
    ] as const
    for (const [query, message] of cases) {
      const { status, body } = await disk.get(`/api/search?${query}`)
      expect([query.slice(0, 30), status]).toEqual([query.slice(0, 30), 400])
      expect(errorBody.parse(body)).toMatchObject({ code: 'API_BAD_REQUEST', message: expect.stringContaining(message) })
    }
    expect(searched.length).toBe(before)
    expect((await disk.get(`/api/search?q=${words.slice(0, SEARCH_MAX_TERMS).join('+')}`)).status).toBe(200)
  })
})
