import { join } from 'node:path'
import { createMemoryPersistence } from '@dsh/session-persistence'
import type { SessionListFilter } from '@dsh/session-query'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { header, message, openQuery, persist, store, tempDir } from './helpers.js'

async function query() {
  const persistence = createMemoryPersistence()
  for (let i = 0; i < 8; i++) {
    await persist(
      persistence,
      header(`s${i}`, 100 + (i % 2), { cwd: '/w', ...(i > 0 ? { parentSession: 's0', origin: 'subagent', delegationDepth: 1 } : {}) }),
      [message(0, `word${i % 3} common`)],
    )
  }
  return (await openQuery({ sessions: store().sessions, persistence, path: join(tempDir(), 'q.sqlite') })).query
}

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'ok'
  } catch (error) {
    return (error as { code?: string }).code ?? `untyped ${String(error)}`
  }
}

const TYPED = ['ok', 'SESSION_QUERY_INVALID_FILTER', 'SESSION_QUERY_INVALID_CURSOR']
const forged = fc.oneof(
  fc.string(),
  fc.base64String(),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  fc
    .record({
      v: fc.constantFrom(1, 2),
      kind: fc.constantFrom('list', 'search-events', 'search-sessions'),
      q: fc.string(),
      g: fc.string(),
      o: fc.integer(),
    })
    .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
)
const validFilter: fc.Arbitrary<SessionListFilter> = fc.record(
  {
    parentSession: fc.constantFrom('s0', 's1'),
    origin: fc.constant('subagent' as const),
    cwd: fc.constantFrom('/w', '/x'),
    createdAt: fc.record({ from: fc.constantFrom(0, 101), to: fc.constantFrom(101, 200) }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
)

describe('malformed requests to the sqlite backend (property-based)', () => {
  it('any listing input fails only with typed filter or cursor errors', async () => {
    const q = await query()
    await fc.assert(
      fc.asyncProperty(fc.anything(), async (input) => {
        expect(TYPED).toContain(await outcome(q.listSessions(input as never)))
      }),
      { numRuns: 300 },
    )
  })

  it('forged listing and search cursors are SESSION_QUERY_INVALID_CURSOR', async () => {
    const q = await query()
    await fc.assert(
      fc.asyncProperty(forged, async (cursor) => {
        expect(await outcome(q.listSessions({ cursor }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        expect(await outcome(q.searchEvents({ text: 'common', cursor }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        expect(await outcome(q.searchSessions({ text: 'common', cursor }))).toBe('SESSION_QUERY_INVALID_CURSOR')
      }),
      { numRuns: 300 },
    )
  })

  it('a listing cursor of another filter is SESSION_QUERY_INVALID_CURSOR', async () => {
    const q = await query()
    await fc.assert(
      fc.asyncProperty(validFilter, validFilter, async (a, b) => {
        const page = await q.listSessions({ ...a, limit: 1 })
        fc.pre(page.nextCursor !== undefined)
        expect(await outcome(q.listSessions({ ...a, cursor: page.nextCursor! }))).toBe('ok')
        const same =
          JSON.stringify([a.parentSession, a.origin, a.cwd, a.createdAt?.from, a.createdAt?.to]) ===
          JSON.stringify([b.parentSession, b.origin, b.cwd, b.createdAt?.from, b.createdAt?.to])
        if (!same) expect(await outcome(q.listSessions({ ...b, cursor: page.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
      }),
      { numRuns: 150 },
    )
  })

  it('any search input fails only with typed errors; a cursor of another text is INVALID_CURSOR', async () => {
    const q = await query()
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.anything(), fc.record({ text: fc.string(), limit: fc.anything() }, { requiredKeys: ['text'] })),
        async (input) => {
          expect(TYPED).toContain(await outcome(q.searchEvents(input as never)))
          expect(TYPED).toContain(await outcome(q.searchSessions(input as never)))
        },
      ),
      { numRuns: 300 },
    )
    const page = await q.searchEvents({ text: 'common', limit: 1 })
    await fc.assert(
      fc.asyncProperty(
        fc.stringMatching(/^[a-z]{1,8}$/).filter((w) => w !== 'common'),
        async (word) => {
          expect(await outcome(q.searchEvents({ text: word, cursor: page.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        },
      ),
      { numRuns: 50 },
    )
  })
})
