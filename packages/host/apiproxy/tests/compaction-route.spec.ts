import type { Summarizer } from '@dsh/compaction'
import { Context } from '@dsh/context'
import { compactionResult, errorBody } from '@dsh/protocol'
import { SessionId, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'
import { extractive } from './support/summarizer.js'

// POST /api/sessions/:id/compact over real HTTP against the real stack: the
// compaction service with its context unit, JSONL files for the on-disk cases.

let stack: Stack | undefined
afterEach(async () => {
  await stack?.close()
  stack = undefined
})

async function post(path: string, options: { token?: string | null; method?: string } = {}) {
  const token = options.token === undefined ? TOKEN : options.token
  const response = await fetch(`${stack!.server.url}${path}`, {
    method: options.method ?? 'POST',
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  })
  return { status: response.status, headers: response.headers, body: (await response.json()) as unknown }
}

function conversation(id: string, turns: number): void {
  const session = stack!.sessions.create({ id })
  for (let t = 1; t <= turns; t++) turn(session, `Question ${t}. With some detail.`)
}

const compactionTypes = (types: readonly string[]) => types.filter((type) => type.startsWith('compaction/'))

describe('POST /api/sessions/:id/compact', () => {
  it('compacts a cold session: loads it as a writer, appends the compaction, answers the range, and takes it out of memory again', async () => {
    stack = await startStack({ backend: 'disk', summarizer: extractive })
    conversation('cold', 4)
    await stack.sessions.dispose('cold')
    expect(stack.sessions.get('cold')).toBeUndefined()

    const { status, body } = await post('/api/sessions/cold/compact?keep=2')
    expect(status).toBe(200)
    const result = compactionResult.parse(body)
    expect(result).toMatchObject({ id: 'cold', shadowed: 6 })
    expect(result.to).toBeGreaterThan(result.from)
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore)
    expect(stack.sessions.get('cold')).toBeUndefined()

    const loaded = await stack.disk!.persistence.inspect(SessionId('cold'))
    const types = loaded.events.map((e) => e.type)
    expect(types.slice(0, 16)).toEqual(
      Array.from({ length: 4 }, () => ['turn/start', 'user/message', 'assistant/message', 'turn/end']).flat(),
    )
    expect(compactionTypes(types)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    const start = loaded.events.find((e) => e.type === 'compaction/start')!
    expect(start.data).toMatchObject({ reason: 'http', compactionId: result.compactionId })
  })

  it('compacts a live session in place (it stays live), and a second compaction with nothing new to shadow is a typed 409', async () => {
    stack = await startStack({ summarizer: extractive })
    conversation('live', 3)
    const first = await post('/api/sessions/live/compact?keep=1')
    expect(first.status).toBe(200)
    expect(compactionResult.parse(first.body)).toMatchObject({ id: 'live', shadowed: 5 })
    const session = stack.sessions.get('live')!
    expect(compactionTypes(session.events.map((e) => e.type))).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    const context = await stack.ctx.require('sessionContext').contextOf(session)
    expect(context.messages).toHaveLength(2)

    const again = await post('/api/sessions/live/compact?keep=1')
    expect(again.status).toBe(409)
    expect(errorBody.parse(again.body).code).toBe('COMPACTION_NOTHING_TO_COMPACT')
  })

  it('is refused with SESSION_PERSISTENCE_LOCKED (409) while another writer holds the session, and appends nothing', async () => {
    stack = await startStack({ backend: 'disk', summarizer: extractive })
    // Another writer over the same root (what another process is) writes the session and keeps its writer lock.
    const other = new Context()
    await other.activate(sessionStorePlugin())
    await other.activate(sessionPersistencePlugin(createJsonlPersistence({ root: stack.disk!.root })))
    try {
      const held = other.require('sessions').create({ id: 'held' })
      // Long enough turns that a summary of their first sentences is shorter than they are.
      for (let t = 1; t <= 3; t++) turn(held, `Question ${t}. ${'With more detail. '.repeat(8)}`)
      await other.require('sessions').flush(held)
      const refused = await post('/api/sessions/held/compact')
      expect(refused.status).toBe(409)
      expect(errorBody.parse(refused.body)).toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
      expect((await stack.disk!.persistence.inspect(SessionId('held'))).events).toHaveLength(12)
      expect(stack.sessions.get('held')).toBeUndefined()
    } finally {
      await other.dispose()
    }
    // Once that writer is gone, the same request compacts.
    expect((await post('/api/sessions/held/compact')).status).toBe(200)
  })

  it('without a compaction service answers a typed 501, for a live and an unknown session alike', async () => {
    stack = await startStack()
    conversation('plain', 2)
    for (const id of ['plain', 'nobody']) {
      const { status, body } = await post(`/api/sessions/${id}/compact`)
      expect(status).toBe(501)
      expect(errorBody.parse(body).code).toBe('API_COMPACTION_UNAVAILABLE')
    }
    expect(stack.errors).toEqual([])
  })

  it('refuses a subagent (403), an unknown session (404) and a bad keep (400), before anything is written', async () => {
    stack = await startStack({ summarizer: extractive })
    conversation('parent', 2)
    await stack.subagents.spawn(stack.sessions.get('parent')!, { mode: 'one-shot', context: 'fresh', prompt: 'go', id: 'child' }).done
    const child = stack.sessions.get('child')
    const childEvents = child?.events.length
    const forbidden = await post('/api/sessions/child/compact')
    expect(forbidden.status).toBe(403)
    expect(errorBody.parse(forbidden.body).code).toBe('API_FORBIDDEN')
    expect(stack.sessions.get('child')?.events.length).toBe(childEvents)
    expect((await post('/api/sessions/nobody/compact')).status).toBe(404)
    for (const keep of ['-1', '10001', 'two']) {
      const bad = await post(`/api/sessions/parent/compact?keep=${keep}`)
      expect(bad.status, keep).toBe(400)
      expect(errorBody.parse(bad.body).code).toBe('API_BAD_REQUEST')
    }
    expect((await post('/api/sessions/parent/compact?unknown=1')).status).toBe(400)
    expect(compactionTypes(stack.sessions.get('parent')!.events.map((e) => e.type))).toEqual([])
  })

  it('takes no read turn while its model works: with one turn for reads, a read is answered while a compaction waits on its summarizer', async () => {
    let release!: () => void
    let asked!: () => void
    const summarizing = new Promise<void>((resolve) => (asked = resolve))
    const held = new Promise<void>((resolve) => (release = resolve))
    const slow: Summarizer = {
      async summarize(input) {
        asked()
        await held
        return extractive.summarize(input)
      },
    }
    stack = await startStack({ summarizer: slow, limits: { maxConcurrentRequests: 1 } })
    conversation('busy', 3)
    const compacting = post('/api/sessions/busy/compact')
    await summarizing
    expect((await stack.get('/api/sessions/busy/history')).status).toBe(200)
    release()
    expect((await compacting).status).toBe(200)
  })

  it('takes the token in the header only, and answers POST only (405 names the method); GET routes stay GET-only', async () => {
    stack = await startStack({ summarizer: extractive })
    conversation('guarded', 3)
    expect((await post('/api/sessions/guarded/compact', { token: null })).status).toBe(401)
    const byQuery = await post(`/api/sessions/guarded/compact?token=${TOKEN}`, { token: null })
    expect(byQuery.status).toBe(401)
    const got = await post('/api/sessions/guarded/compact', { method: 'GET' })
    expect(got.status).toBe(405)
    expect(got.headers.get('allow')).toBe('POST')
    expect(errorBody.parse(got.body).code).toBe('API_METHOD_NOT_ALLOWED')
    const posted = await post('/api/sessions/guarded/history')
    expect(posted.status).toBe(405)
    expect(posted.headers.get('allow')).toBe('GET, HEAD')
    expect(compactionTypes(stack.sessions.get('guarded')!.events.map((e) => e.type))).toEqual([])
  })
})
