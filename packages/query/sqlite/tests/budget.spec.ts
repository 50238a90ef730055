import { join } from 'node:path'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import type { SessionListFilter } from '@dsh/session-query'
import { describe, expect, it } from 'vitest'
import type { SqliteSessionQuery, SqliteSessionQueryOptions } from '../src/index.js'
import { code, header, message, openQuery, persist, store, tempDir } from './helpers.js'

const WORDS = [
  'alpha',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliet',
  'kilo',
  'lima',
  'mike',
  'november',
  'oscar',
  'papa',
]

/** `sessions` sessions of `events` events each; every event holds 'the' and all 16 words, one holds 'quokka'. */
async function corpus(sessions: number, events: number): Promise<SessionPersistence> {
  const persistence = createMemoryPersistence()
  for (let s = 0; s < sessions; s++) {
    const batch = Array.from({ length: events }, (_, e) =>
      message(e, `the ${WORDS.join(' ')} ${s === 0 && e === 0 ? 'quokka' : `n${s}x${e}`}`),
    )
    await persist(persistence, header(`s${String(s).padStart(4, '0')}`, s), batch)
  }
  return persistence
}

async function open(persistence: SessionPersistence, options: Partial<SqliteSessionQueryOptions> = {}): Promise<SqliteSessionQuery> {
  return (await openQuery({ sessions: store().sessions, persistence, path: join(tempDir(), 'q.sqlite'), ...options })).query
}

async function tick(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve))
}

describe('search that cannot be weaponised', () => {
  it("'the' repeated 249 times is one term: it answers, stepping each matching event once", async () => {
    const query = await open(await corpus(30, 10))
    const text = Array.from({ length: 249 }, () => 'the').join(' ')
    const events = await query.searchEvents({ text, limit: 100 })
    expect(events.hits).toHaveLength(100)
    // 300 events hold 'the'; a query whose work grew with repeated terms would step more.
    expect(query.metrics.lastRowsStepped).toBe(300)
    const sessions = await query.searchSessions({ text, limit: 100 })
    expect(sessions.hits).toHaveLength(30)
    expect(sessions.hits.every((h) => h.matches === 10)).toBe(true)
    expect(query.metrics.lastRowsStepped).toBe(300)
    // The same request with the word once is the same request (same hits, same cursor).
    expect(await query.searchEvents({ text: 'the', limit: 100 })).toEqual(events)
  })

  it('caps distinct terms and text length with the protocol limits', async () => {
    const query = await open(await corpus(2, 2))
    expect((await query.searchEvents({ text: WORDS.join(' ') })).hits).toHaveLength(4)
    expect(await code(query.searchEvents({ text: `${WORDS.join(' ')} zulu` }))).toBe('SESSION_QUERY_INVALID_FILTER')
    await expect(query.searchEvents({ text: `${WORDS.join(' ')} zulu` })).rejects.toThrow(/17 distinct words; a search takes at most 16/)
    expect(await code(query.searchEvents({ text: 'a'.repeat(1001) }))).toBe('SESSION_QUERY_INVALID_FILTER')
    expect(await code(query.searchEvents({ text: 'the', limit: 101 }))).toBe('SESSION_QUERY_INVALID_FILTER')
  })

  it('stops a statement past its row budget with SESSION_QUERY_BUDGET_EXCEEDED; a narrow request still answers', async () => {
    const query = await open(await corpus(10, 10), { budget: { ms: 600_000, rows: 25 } })
    const error = await query.searchEvents({ text: 'the' }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'SESSION_QUERY_BUDGET_EXCEEDED', details: { stepped: 26, budgetRows: 25 } })
    expect(query.metrics.budgetExceeded).toBe(1)
    expect(await code(query.searchSessions({ text: 'the' }))).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
    expect((await query.searchEvents({ text: 'quokka' })).hits.map((h) => h.id)).toEqual(['s0000'])
    // Listings are budgeted too: a page of 10 steps few rows, the whole corpus of 10 sessions fits.
    expect((await query.listSessions({ limit: 5 })).records).toHaveLength(5)
  })

  it('a zero time budget stops every statement that steps a row', async () => {
    const query = await open(await corpus(3, 2), { budget: { ms: 0 } })
    expect(await code(query.searchEvents({ text: 'the' }))).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
    expect(await code(query.listSessions())).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
  })
})

describe('the worker mode', () => {
  it('answers exactly as the inline mode', async () => {
    const persistence = await corpus(12, 3)
    const inline = await open(persistence)
    const worker = await open(persistence, { worker: true })
    const filters: SessionListFilter[] = [{}, { limit: 5 }, { createdAt: { from: 3, to: 7 } }]
    for (const filter of filters) expect(await worker.listSessions(filter)).toEqual(await inline.listSessions(filter))
    for (const text of ['the', 'quokka', 'alpha n3x1']) {
      const [a, b] = [await inline.searchEvents({ text, limit: 7 }), await worker.searchEvents({ text, limit: 7 })]
      expect(b.hits).toEqual(a.hits)
      if (b.nextCursor !== undefined) expect((await worker.searchEvents({ text, limit: 7, cursor: b.nextCursor })).hits).toHaveLength(7)
      expect((await worker.searchSessions({ text, limit: 5 })).hits).toEqual((await inline.searchSessions({ text, limit: 5 })).hits)
    }
    const budgeted = await open(persistence, { worker: true, budget: { ms: 600_000, rows: 3 } })
    expect(await code(budgeted.searchEvents({ text: 'the' }))).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
    expect(budgeted.metrics.lastRowsStepped).toBe(4)
  })

  it('keeps the event loop serving while a long search runs, and close() does not wait for it', async () => {
    const persistence = await corpus(100, 100)
    const query = await open(persistence, { worker: true })
    const text = WORDS.join(' ')
    let settled = false
    const searching = query.searchSessions({ text, limit: 10 }).finally(() => {
      settled = true
    })
    while (query.metrics.inFlight === 0 && !settled) await tick()
    // A tick of this event loop ran while the statement was in the worker: the search did not block it.
    expect(settled).toBe(false)
    let ticks = 0
    while (query.metrics.inFlight > 0) {
      ticks++
      await tick()
    }
    expect(ticks).toBeGreaterThan(0)
    expect((await searching).hits).toHaveLength(10)
    expect(query.metrics.lastRowsStepped).toBe(10_000)

    // Closing while a statement runs: the request fails at once, close() resolves without it.
    const again = code(query.searchEvents({ text, limit: 10 }))
    while (query.metrics.inFlight === 0) await tick()
    await query.close()
    expect(await again).toBe('SESSION_QUERY_CLOSED')
  })
})

describe('the children of several parents (parentSessions)', () => {
  it('step their own rows only: within a 30-row budget on a store of 2,000 other subagents, which a store-wide listing exceeds', async () => {
    const persistence = createMemoryPersistence()
    const sub = (parent: string) => ({ parentSession: parent, origin: 'subagent' as const, delegationDepth: 1 })
    for (let p = 0; p < 100; p++) for (let c = 0; c < 20; c++) await persist(persistence, header(`o${p}-${c}`, p * 20 + c, sub(`o${p}`)))
    const children = Array.from({ length: 20 }, (_, i) => `c${i}`)
    for (const [i, id] of children.entries()) await persist(persistence, header(id, 5000 + i, sub('p')))
    for (const parent of ['c2', 'c3', 'c4']) await persist(persistence, header(`g-${parent}`, 6000, sub(parent)))
    const query = await open(persistence, { budget: { ms: 600_000, rows: 30 } })
    const page = await query.listSessions({ parentSessions: children, origin: 'subagent', limit: 1000 })
    expect(page.records.map((r) => r.header.id)).toEqual(['g-c2', 'g-c3', 'g-c4'])
    expect(await code(query.listSessions({ origin: 'subagent', limit: 1000 }))).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
  })
})

describe('sessions by id (ids)', () => {
  it('step their own rows only: within a 5-row budget on a store of 2,000 sessions, which a store-wide listing exceeds', async () => {
    const persistence = createMemoryPersistence()
    for (let i = 0; i < 2000; i++) await persist(persistence, header(`s${i}`, i))
    const query = await open(persistence, { budget: { ms: 600_000, rows: 5 } })
    const page = await query.listSessions({ ids: ['s1999', 's7', 'nobody', 's1000'], limit: 1000 })
    expect(page.records.map((r) => r.header.id)).toEqual(['s7', 's1000', 's1999'])
    expect(await code(query.listSessions({ limit: 1000 }))).toBe('SESSION_QUERY_BUDGET_EXCEEDED')
  })
})
