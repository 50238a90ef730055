import { errorBody, historyPage } from '@dsh/protocol'
import { CURSOR_MAX_LENGTH, ID_MAX_LENGTH, PARAM_MAX_LENGTH, SEARCH_MAX_TEXT } from '@dsh/protocol/limits'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS } from '../src/index.js'
import { rawGet } from './support/raw-http.js'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'

// Ids and parameters on the wire, over a real server bound to 127.0.0.1:
// awkward ids round-trip, bad ones are typed errors, and every request the
// protocol's limits allow reaches its route.

const IDS = ['../evil', 'a/b', '100%', '%2E%2E', 'a/../b', '会话 🚀', 'quote\'"<tag>']

let stack: Stack

beforeAll(async () => {
  stack = await startStack()
  for (const id of IDS) turn(stack.sessions.create({ id }), `hello from ${id}`)
})

afterAll(async () => {
  await stack.close()
})

const enc = encodeURIComponent

describe('ids and parameters', () => {
  it('round-trips ids holding "..", "/", "%", unicode and markup', async () => {
    for (const id of IDS) {
      const { status, body } = await stack.get(`/api/sessions/${enc(id)}/history`)
      expect([id, status]).toEqual([id, 200])
      const page = historyPage.parse(body)
      expect(page.header.id).toBe(id)
      expect(page.events.some((e) => (e.data as { text?: string }).text === `hello from ${id}`)).toBe(true)
    }
  })

  it('refuses dot segments sent raw or percent-encoded instead of resolving them', async () => {
    for (const target of [
      '/api/sessions/../history',
      '/api/sessions/%2E%2E/history',
      '/api/sessions/%2e/history',
      '/api/sessions/parent/subagents/../history',
    ]) {
      const response = await rawGet(stack.server.url, target, TOKEN)
      expect([target, response.status]).toEqual([target, 400])
      expect(errorBody.parse(JSON.parse(response.body)).code).toBe('API_BAD_REQUEST')
    }
  })

  it('refuses NUL, malformed percent-encoding, empty and over-long ids with typed errors', async () => {
    const cases: Array<[string, number, string]> = [
      ['/api/sessions/a%00b/history', 400, 'API_BAD_REQUEST'],
      ['/api/sessions/%E0%A4/history', 400, 'API_BAD_REQUEST'],
      ['/api/sessions/%/history', 400, 'API_BAD_REQUEST'],
      ['/api/sessions//history', 400, 'API_BAD_REQUEST'],
      [`/api/sessions/${'x'.repeat(1025)}/history`, 400, 'API_BAD_REQUEST'],
      [`/api/sessions/${'x'.repeat(10 * 1024)}/history`, 400, 'API_BAD_REQUEST'],
      // 1100 characters decode from 6.6 KB of escapes: the id limit counts decoded characters.
      [`/api/sessions/${enc('ü'.repeat(1100))}/history`, 400, 'API_BAD_REQUEST'],
      [`/api/sessions/${'x'.repeat(DEFAULT_LIMITS.maxUrlLength)}/history`, 414, 'API_URI_TOO_LONG'],
      [`/api/sessions?parentSession=${'p'.repeat(10 * 1024)}`, 400, 'API_BAD_REQUEST'],
      [`/api/search?q=${'q'.repeat(2000)}`, 400, 'API_BAD_REQUEST'],
    ]
    for (const [target, status, code] of cases) {
      const response = await rawGet(stack.server.url, target, TOKEN)
      expect([target.slice(0, 40), response.status]).toEqual([target.slice(0, 40), status])
      expect(errorBody.parse(JSON.parse(response.body)).code).toBe(code)
    }
  })

  it('takes the longest requests the protocol allows, every character escaped: each is answered by its route, never 414', async () => {
    // BMP characters of three UTF-8 bytes: nine bytes each once escaped.
    const id = (c: string) => enc(c.repeat(ID_MAX_LENGTH))
    const cursor = 'A'.repeat(CURSOR_MAX_LENGTH)
    const cases: Array<[string, number, string | undefined]> = [
      // A cursor of the longest length reaches the query, which finds it is not one of its own.
      [
        `/api/sessions?parentSession=${id('界')}&cwd=${enc('路'.repeat(PARAM_MAX_LENGTH))}&cursor=${cursor}&limit=5`,
        400,
        'SESSION_QUERY_INVALID_CURSOR',
      ],
      [`/api/sessions?parentSession=${id('界')}&cwd=${enc('路'.repeat(PARAM_MAX_LENGTH))}&limit=5`, 200, undefined],
      // The route answers: the parent has no such subagent.
      [`/api/sessions/${id('親')}/subagents/${id('子')}/history`, 404, 'API_NOT_FOUND'],
      // This stack's query has no search: the route is reached and says so.
      [`/api/search?q=${enc('検'.repeat(SEARCH_MAX_TEXT))}&cursor=${cursor}`, 501, undefined],
    ]
    for (const [target, status, code] of cases) {
      expect(target.length).toBeGreaterThan(16 * 1024)
      expect(target.length).toBeLessThanOrEqual(DEFAULT_LIMITS.maxUrlLength)
      const response = await rawGet(stack.server.url, target, TOKEN)
      expect([target.slice(0, 40), response.status]).toEqual([target.slice(0, 40), status])
      if (code !== undefined) expect(errorBody.parse(JSON.parse(response.body)).code).toBe(code)
    }
  })

  it('keeps answering after refusing bad requests', async () => {
    expect((await stack.get('/api/sessions?limit=1')).status).toBe(200)
  })
})
