import { Context } from '@dsh/context'
import { SEARCH_MAX_TERMS, SEARCH_MAX_TEXT, SEARCH_PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { type SessionHeader, SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { type HeaderFields, headerOf } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { idOrderContract } from './contract-id-order.js'
import type { EventSearchHit, SessionQuery, SessionQueryRecord } from './types.js'

/** One persistence instance for one contract test. */
export interface ContractPersistence {
  readonly persistence: SessionPersistence
  /**
   * Damages a committed part of `id`'s log so that reads of it fail with
   * `SESSION_PERSISTENCE_CORRUPT` while its header stays listable. Required
   * when the suite runs with `corruptible: true`.
   */
  corrupt?(id: string): Promise<void>
  /** Closes the persistence and removes its files. */
  cleanup(): Promise<void>
}

export interface SessionQueryContractOptions {
  /** A fresh, empty persistence. */
  createPersistence(): Promise<ContractPersistence>
  /**
   * Opens the backend under test. The suite persists each test's corpus
   * before it opens the query, so an index backend sees it on open; live
   * sessions may change afterwards.
   */
  openQuery(sources: { readonly sessions: SessionStore; readonly persistence: SessionPersistence }): Promise<SessionQuery> | SessionQuery
  /** Whether `createPersistence()` fixtures can `corrupt` a log; enables the corrupt-log contract. */
  readonly corruptible?: boolean
  /**
   * Whether the backend implements `searchSessions`/`searchEvents`; enables
   * the search contract (every word required, distinct terms, the protocol's
   * limits, deterministic pages). Rankings may differ between backends; only
   * their order and paging are checked.
   */
  readonly search?: boolean
}

const T0 = 1_700_000_000_000

interface Env {
  readonly persistence: SessionPersistence
  readonly sessions: SessionStore
  readonly corrupt: ((id: string) => Promise<void>) | undefined
  open(): Promise<SessionQuery>
}

function header(id: string, createdAt: number, extra: HeaderFields = {}): SessionHeader {
  return headerOf(id, { createdAt, ...extra })
}

function messages(texts: readonly string[], from = 0): StoredSessionEvent[] {
  return texts.map((text, i) => ({ type: 'user/message', seq: SessionSeq(from + i), time: T0 + from + i, data: { text } }))
}

async function persist(
  persistence: SessionPersistence,
  h: SessionHeader,
  events: readonly StoredSessionEvent[] = [],
  cut = 0,
): Promise<void> {
  await persistence.append({ header: h, inheritedEventCount: SessionLogOffset(cut) }, events)
}

function ids(records: readonly SessionQueryRecord[]): string[] {
  return records.map((r) => r.header.id)
}

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    return (error as { code?: string }).code ?? `untyped: ${String(error)}`
  }
  return 'resolved'
}

/**
 * The query contract every `sessionQuery` backend passes: the live-preferred
 * corpus, filters, ordering, keyset paging with strict cursors, body-bearing
 * observations, history reads, typed errors and cancellation.
 */
export function sessionQueryContractSuite(name: string, options: SessionQueryContractOptions): void {
  describe(`sessionQuery contract: ${name}`, () => {
    const cleanups: Array<() => unknown> = []

    afterEach(async () => {
      while (cleanups.length > 0) await cleanups.pop()!()
    })

    async function env(): Promise<Env> {
      const fixture = await options.createPersistence()
      cleanups.push(() => fixture.cleanup())
      const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
      let n = 0
      const sessions = new SessionStore(ctx, { clock: () => T0 + 1_000_000 + n++ })
      cleanups.push(() => ctx.dispose())
      return {
        persistence: fixture.persistence,
        sessions,
        corrupt: fixture.corrupt?.bind(fixture),
        async open() {
          const query = await options.openQuery({ sessions, persistence: fixture.persistence })
          cleanups.push(() => query.close?.())
          return query
        },
      }
    }

    it('lists persisted sessions by createdAt, then id in code point order, with exact cuts and revisions', async () => {
      const e = await env()
      await persist(e.persistence, header('b', 2000))
      await persist(e.persistence, header('a', 2000), messages(['x']))
      await persist(e.persistence, header('c', 1000))
      // U+FFFF sorts before U+10000 by code point (UTF-16 code units say otherwise).
      await persist(e.persistence, header('\u{10000}', 3000))
      await persist(e.persistence, header('\uffff', 3000))
      await persist(e.persistence, header('seeded', 4000, { isSeeded: true }), messages(['p', 'q', 'own']), 2)
      const query = await e.open()
      const page = await query.listSessions()
      expect(ids(page.records)).toEqual(['c', 'a', 'b', '\uffff', '\u{10000}', 'seeded'])
      expect(page.nextCursor).toBeUndefined()
      for (const record of page.records) {
        expect(record.live).toBe(false)
        expect(record.persisted).toBe(true)
        expect(record.revision).toBe(await e.persistence.stat(record.header.id as never))
      }
      const seeded = page.records[5]!
      expect(seeded.inheritedEventCount).toBe(2)
      expect(seeded.header.isSeeded).toBe(true)
      expect(page.records[0]!.inheritedEventCount).toBe(0)
    })

    it('prefers the live header over the persisted one for the same id, and lists live-only sessions', async () => {
      const e = await env()
      await persist(e.persistence, header('p', 1000, { cwd: '/old' }), messages(['persisted']))
      await persist(e.persistence, header('cold', 1500))
      const query = await e.open()
      const live = e.sessions.create({ id: 'p', createdAt: 5000, cwd: '/new' })
      e.sessions.create({ id: 'fresh', createdAt: 3000 })
      const page = await query.listSessions()
      expect(ids(page.records)).toEqual(['cold', 'fresh', 'p'])
      const [cold, fresh, p] = page.records
      expect(p).toMatchObject({ live: true, persisted: true, revision: await e.persistence.stat(live.id) })
      expect(p!.header).toBe(live.header)
      expect(fresh).toMatchObject({ live: true, persisted: false })
      expect(fresh).not.toHaveProperty('revision')
      expect(cold).toMatchObject({ live: false, persisted: true })
      // Filters see the live header, never the shadowed persisted one.
      expect(ids((await query.listSessions({ cwd: '/old' })).records)).toEqual([])
      expect(ids((await query.listSessions({ cwd: '/new' })).records)).toEqual(['p'])
    })

    it('filters by parentSession, origin, cwd and an inclusive createdAt range', async () => {
      const e = await env()
      await persist(e.persistence, header('P', 100, { cwd: '/w' }))
      await persist(e.persistence, header('c1', 200, { parentSession: 'P', origin: 'subagent', delegationDepth: 1, cwd: '/w' }))
      await persist(e.persistence, header('c2', 300, { parentSession: 'P', origin: 'subagent', delegationDepth: 1 }))
      await persist(e.persistence, header('fork', 250, { parentSession: 'P', isSeeded: true }))
      await persist(e.persistence, header('other', 260, { parentSession: 'Q', origin: 'subagent', delegationDepth: 1, cwd: '/w' }))
      const query = await e.open()
      e.sessions.create({ id: 'c3', createdAt: 150, parentSession: 'P', origin: 'subagent', delegationDepth: 1 })
      const children = await query.listSessions({ parentSession: 'P', origin: 'subagent' })
      expect(ids(children.records)).toEqual(['c3', 'c1', 'c2'])
      expect(children.records.map((r) => r.live)).toEqual([true, false, false])
      expect(ids((await query.listSessions({ parentSession: 'P' })).records)).toEqual(['c3', 'c1', 'fork', 'c2'])
      expect(ids((await query.listSessions({ origin: 'subagent' })).records)).toEqual(['c3', 'c1', 'other', 'c2'])
      expect(ids((await query.listSessions({ cwd: '/w' })).records)).toEqual(['P', 'c1', 'other'])
      expect(ids((await query.listSessions({ createdAt: { from: 200, to: 260 } })).records)).toEqual(['c1', 'fork', 'other'])
      expect(ids((await query.listSessions({ createdAt: { from: 260 } })).records)).toEqual(['other', 'c2'])
      expect(ids((await query.listSessions({ createdAt: { to: 150 } })).records)).toEqual(['P', 'c3'])
      expect(ids((await query.listSessions({ parentSession: 'nobody' })).records)).toEqual([])
    })

    it('lists the children of several parents with parentSessions: live headers preferred, other families left out, paged', async () => {
      const e = await env()
      await persist(e.persistence, header('a1', 200, { parentSession: 'A', origin: 'subagent', delegationDepth: 1 }))
      await persist(e.persistence, header('b1', 210, { parentSession: 'B', origin: 'subagent', delegationDepth: 1 }))
      await persist(e.persistence, header('b-fork', 220, { parentSession: 'B', isSeeded: true }))
      await persist(e.persistence, header('z1', 230, { parentSession: 'Z', origin: 'subagent', delegationDepth: 1 }))
      // Persisted under Z, live under A: the live header decides.
      await persist(e.persistence, header('moved', 240, { parentSession: 'Z', origin: 'subagent', delegationDepth: 1 }))
      const query = await e.open()
      e.sessions.create({ id: 'moved', createdAt: 240, parentSession: 'A', origin: 'subagent', delegationDepth: 1 })
      e.sessions.create({ id: 'b2', createdAt: 150, parentSession: 'B', origin: 'subagent', delegationDepth: 1 })
      const family = await query.listSessions({ parentSessions: ['A', 'B', 'A', 'nobody'], origin: 'subagent' })
      expect(ids(family.records)).toEqual(['b2', 'a1', 'b1', 'moved'])
      expect(ids((await query.listSessions({ parentSessions: ['B'] })).records)).toEqual(['b2', 'b1', 'b-fork'])
      expect(ids((await query.listSessions({ parentSessions: ['Z'] })).records)).toEqual(['z1'])
      expect(ids((await query.listSessions({ parentSessions: ['nobody'] })).records)).toEqual([])
      const first = await query.listSessions({ parentSessions: ['A', 'B'], limit: 2 })
      expect(ids(first.records)).toEqual(['b2', 'a1'])
      const rest = await query.listSessions({ parentSessions: ['A', 'B'], limit: 5, cursor: first.nextCursor! })
      expect(ids(rest.records)).toEqual(['b1', 'b-fork', 'moved'])
      // A cursor is bound to the parent list too.
      expect(await code(query.listSessions({ parentSessions: ['A'], limit: 2, cursor: first.nextCursor! }))).toBe(
        'SESSION_QUERY_INVALID_CURSOR',
      )
    })

    it('looks sessions up by id with ids: live headers preferred, unknown ids left out, other filters applied, paged', async () => {
      const e = await env()
      await persist(e.persistence, header('k1', 200, { cwd: '/w' }))
      await persist(e.persistence, header('k2', 210, { parentSession: 'k1', origin: 'subagent', delegationDepth: 1 }))
      await persist(e.persistence, header('k3', 220))
      await persist(e.persistence, header('k4', 250, { parentSession: 'k1', origin: 'subagent', delegationDepth: 1 }))
      // Persisted at 230, live at 150: the live header decides.
      await persist(e.persistence, header('moved', 230))
      const query = await e.open()
      e.sessions.create({ id: 'moved', createdAt: 150 })
      e.sessions.create({ id: 'live-only', createdAt: 240 })
      const found = await query.listSessions({ ids: ['k3', 'k1', 'moved', 'k3', 'nobody', 'live-only'] })
      expect(ids(found.records)).toEqual(['moved', 'k1', 'k3', 'live-only'])
      expect(found.records.find((r) => r.header.id === 'moved')?.live).toBe(true)
      expect(ids((await query.listSessions({ ids: ['nobody'] })).records)).toEqual([])
      expect(ids((await query.listSessions({ ids: ['k1', 'k2', 'k3'], origin: 'subagent' })).records)).toEqual(['k2'])
      expect(ids((await query.listSessions({ ids: ['k1', 'k2'], parentSession: 'k1' })).records)).toEqual(['k2'])
      expect(ids((await query.listSessions({ ids: ['k1', 'k3'], cwd: '/w' })).records)).toEqual(['k1'])
      const first = await query.listSessions({ ids: ['k1', 'k2', 'k3'], limit: 2 })
      expect(ids(first.records)).toEqual(['k1', 'k2'])
      expect(ids((await query.listSessions({ ids: ['k1', 'k2', 'k3'], limit: 2, cursor: first.nextCursor! })).records)).toEqual(['k3'])
      // A cursor is bound to the id list, and an id list is not a parent list.
      expect(await code(query.listSessions({ ids: ['k1', 'k3'], limit: 2, cursor: first.nextCursor! }))).toBe(
        'SESSION_QUERY_INVALID_CURSOR',
      )
      const byParent = await query.listSessions({ parentSessions: ['k1'], limit: 1 })
      expect(byParent.nextCursor).toBeDefined()
      expect(await code(query.listSessions({ ids: ['k1'], limit: 1, cursor: byParent.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
    })

    it('pages with an opaque cursor bound to the filter; pages concatenate to the whole listing', async () => {
      const e = await env()
      for (let i = 0; i < 7; i++) await persist(e.persistence, header(`s${i}`, 1000 + (i % 3), { cwd: '/p' }))
      const query = await e.open()
      e.sessions.create({ id: 's-live', createdAt: 1001, cwd: '/p' })
      const whole = ids((await query.listSessions({ cwd: '/p' })).records)
      expect(whole).toHaveLength(8)
      const seen: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await query.listSessions({ cwd: '/p', limit: 3, ...(cursor === undefined ? {} : { cursor }) })
        expect(page.records.length).toBeLessThanOrEqual(3)
        seen.push(...ids(page.records))
        cursor = page.nextCursor
        pages++
      } while (cursor !== undefined)
      expect(pages).toBe(3)
      expect(seen).toEqual(whole)
      const first = await query.listSessions({ cwd: '/p', limit: 3 })
      // The page size may change between pages; the filter may not.
      expect(ids((await query.listSessions({ cwd: '/p', limit: 5, cursor: first.nextCursor! })).records)).toEqual(whole.slice(3))
      expect(await code(query.listSessions({ cwd: '/q', limit: 3, cursor: first.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
      expect(await code(query.listSessions({ limit: 3, cursor: first.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
      // A page that ends exactly at the last match has no next cursor.
      expect((await query.listSessions({ cwd: '/p', limit: 8 })).nextCursor).toBeUndefined()
    })

    it('returns every match when no limit is given', async () => {
      const e = await env()
      const query = await e.open()
      for (let i = 0; i < 1100; i++) e.sessions.create({ id: `live-${String(i).padStart(4, '0')}`, createdAt: T0 })
      const page = await query.listSessions({})
      expect(page.records).toHaveLength(1100)
      expect(page.nextCursor).toBeUndefined()
    })

    it('rejects malformed filters and cursors with typed errors', async () => {
      const e = await env()
      await persist(e.persistence, header('x', 1))
      const query = await e.open()
      const badFilters: unknown[] = [
        null,
        5,
        'x',
        [],
        { parentSession: 5 },
        { parentSession: '' },
        { parentSessions: [] },
        { parentSessions: 'P' },
        { parentSessions: [''] },
        { parentSessions: ['P', 5] },
        { parentSessions: Array.from({ length: 1001 }, (_, i) => `p${i}`) },
        { parentSession: 'P', parentSessions: ['Q'] },
        { ids: [] },
        { ids: 'x' },
        { ids: [''] },
        { ids: ['x', 5] },
        { ids: Array.from({ length: 1001 }, (_, i) => `s${i}`) },
        { origin: 'human' },
        { cwd: {} },
        { createdAt: 5 },
        { createdAt: { from: -1 } },
        { createdAt: { from: 1.5 } },
        { createdAt: { from: 9, to: 1 } },
        { createdAt: { since: 1 } },
        { limit: 0 },
        { limit: 1001 },
        { limit: 2.5 },
        { limit: '10' },
        { unknown: true },
      ]
      for (const filter of badFilters)
        expect(await code(query.listSessions(filter as never)), JSON.stringify(filter)).toBe('SESSION_QUERY_INVALID_FILTER')
      const forged = (payload: unknown): string => Buffer.from(JSON.stringify(payload)).toString('base64url')
      const badCursors: unknown[] = [
        '',
        'not base64!',
        5,
        null,
        forged({}),
        forged([1]),
        Buffer.from('\xff\xfe').toString('base64url'),
        forged({ v: 1, kind: 'list', f: 'wrong', c: 1, i: 'x' }),
        forged({ v: 2, kind: 'list', f: 'x', c: 1, i: 'x' }),
        'eyJ2IjoxfQ=',
      ]
      for (const cursor of badCursors)
        expect(await code(query.listSessions({ cursor } as never)), String(cursor)).toBe('SESSION_QUERY_INVALID_CURSOR')
    })

    it('observes live sessions from memory and persisted ones through persistence', async () => {
      const e = await env()
      await persist(e.persistence, header('cold', 10, { isSeeded: true }), messages(['a', 'b', 'c']), 1)
      const query = await e.open()
      const live = e.sessions.create({ id: 'hot' })
      live.append('user/message', { text: 'hello' })
      const reads = e.persistence.metrics.bodyReads
      const hot = await query.observeSession('hot')
      expect(e.persistence.metrics.bodyReads).toBe(reads)
      expect(hot).toMatchObject({ live: true, inheritedEventCount: 0 })
      expect(hot.header).toBe(live.header)
      expect(hot.events).toEqual(live.events)
      const cold = await query.observeSession('cold')
      expect(cold).toMatchObject({ live: false, inheritedEventCount: 1, revision: await e.persistence.stat('cold' as never) })
      expect(cold.events.map((x) => x.data)).toEqual([{ text: 'a' }, { text: 'b' }, { text: 'c' }])
      expect(await code(query.observeSession('missing'))).toBe('SESSION_QUERY_NOT_FOUND')
      expect(await code(query.observeSession(''))).toBe('SESSION_QUERY_INVALID_FILTER')
    })

    it('a history page or window of a persisted log reads the batches that hold it, not the log; a live one reads nothing', async () => {
      const e = await env()
      const h = header('long', 1)
      // Text that does not compress away, so a batch weighs what a transcript's does against a trailer.
      let x = 12345
      const noise = (): string =>
        Array.from({ length: 24 }, () => {
          x = (x * 1103515245 + 12345) % 2 ** 31
          return (x >>> 8).toString(36)
        }).join(' ')
      for (let batch = 0; batch < 200; batch++) await persist(e.persistence, h, messages(Array.from({ length: 20 }, noise), batch * 20))
      const query = await e.open()
      const bytes = async (read: () => Promise<unknown>): Promise<number> => {
        const before = e.persistence.metrics.bytesRead
        await read()
        return e.persistence.metrics.bytesRead - before
      }
      const whole = await bytes(() => query.observeSession('long'))
      const page = await query.readHistory('long', { limit: 5 })
      expect(page.events.map((x) => x.seq)).toEqual([3995, 3996, 3997, 3998, 3999])
      expect(page).toMatchObject({ total: 4000, nextBefore: 3995 })
      for (const [name, read] of [
        ['tail', () => query.readHistory('long', { limit: 5 })],
        // Far from the end: the batches after it are walked by their trailers, not read.
        ['middle', () => query.readHistory('long', { limit: 10, before: 2000 })],
        ['window', () => query.readWindow('long', { seq: 3900, before: 3, after: 3 })],
      ] as const) {
        const cost = await bytes(read)
        expect(cost).toBeGreaterThan(0)
        expect(cost * 10, `${name}: ${cost} of ${whole}`).toBeLessThan(whole)
      }
      const live = e.sessions.create({ id: 'live-long' })
      for (let i = 0; i < 50; i++) live.append('user/message', { text: `l${i}` })
      expect(await bytes(() => query.readHistory('live-long', { limit: 3 }))).toBe(0)
    })

    it('reads history pages backwards and exact windows around a seq', async () => {
      const e = await env()
      await persist(e.persistence, header('h', 1), messages(Array.from({ length: 25 }, (_, i) => `m${i}`)))
      const query = await e.open()
      const seqs = (events: readonly StoredSessionEvent[]): number[] => events.map((x) => x.seq)
      const last = await query.readHistory('h', { limit: 10 })
      expect(seqs(last.events)).toEqual([15, 16, 17, 18, 19, 20, 21, 22, 23, 24])
      expect(last).toMatchObject({ total: 25, nextBefore: 15, inheritedEventCount: 0 })
      const middle = await query.readHistory('h', { limit: 10, before: last.nextBefore! })
      expect(seqs(middle.events)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
      const first = await query.readHistory('h', { limit: 10, before: middle.nextBefore! })
      expect(seqs(first.events)).toEqual([0, 1, 2, 3, 4])
      expect(first).not.toHaveProperty('nextBefore')
      expect(seqs((await query.readHistory('h', { before: 1000, limit: 2 })).events)).toEqual([23, 24])
      expect((await query.readHistory('h')).events).toHaveLength(25)
      const live = e.sessions.create({ id: 'live-h' })
      for (let i = 0; i < 3; i++) live.append('user/message', { text: `l${i}` })
      expect(seqs((await query.readHistory('live-h', { limit: 2 })).events)).toEqual([1, 2])
      expect(seqs((await query.readWindow('h', { seq: 12, before: 2, after: 3 })).events)).toEqual([10, 11, 12, 13, 14, 15])
      expect(seqs((await query.readWindow('h', { seq: 1, before: 5, after: 0 })).events)).toEqual([0, 1])
      expect(seqs((await query.readWindow('h', { seq: 24 })).events)).toEqual([14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24])
      expect(await code(query.readWindow('h', { seq: 25 }))).toBe('SESSION_QUERY_NOT_FOUND')
      expect(await code(query.readWindow('h', { seq: -1 }))).toBe('SESSION_QUERY_INVALID_FILTER')
      expect(await code(query.readHistory('h', { limit: 0 }))).toBe('SESSION_QUERY_INVALID_FILTER')
      expect(await code(query.readHistory('h', { before: 1.5 }))).toBe('SESSION_QUERY_INVALID_FILTER')
      expect(await code(query.readHistory('nope'))).toBe('SESSION_QUERY_NOT_FOUND')
    })

    it('rejects with CANCELLED when aborted before or during a read, and keeps working afterwards', async () => {
      const e = await env()
      await persist(e.persistence, header('cold', 1), messages(['x', 'y']))
      const query = await e.open()
      e.sessions.create({ id: 'hot' })
      const aborted = AbortSignal.abort()
      expect(await code(query.listSessions({}, aborted))).toBe('CANCELLED')
      expect(await code(query.observeSession('cold', aborted))).toBe('CANCELLED')
      expect(await code(query.observeSession('hot', aborted))).toBe('CANCELLED')
      expect(await code(query.readHistory('cold', {}, aborted))).toBe('CANCELLED')
      expect(await code(query.readWindow('cold', { seq: 0 }, aborted))).toBe('CANCELLED')
      // Aborted while in flight: the read may settle later, but never successfully.
      for (const start of [
        (s: AbortSignal) => query.listSessions({}, s),
        (s: AbortSignal) => query.observeSession('cold', s),
        (s: AbortSignal) => query.readHistory('cold', {}, s),
      ]) {
        const controller = new AbortController()
        const pending = start(controller.signal)
        controller.abort()
        expect(await code(pending)).toBe('CANCELLED')
      }
      expect(ids((await query.listSessions()).records)).toEqual(['cold', 'hot'])
      expect((await query.observeSession('cold')).events).toHaveLength(2)
    })

    it('does not list or observe a session deleted from persistence', async () => {
      const e = await env()
      await persist(e.persistence, header('kept', 1))
      await persist(e.persistence, header('gone', 2), messages(['bye']))
      expect(await e.persistence.delete('gone' as never)).toBe(true)
      const query = await e.open()
      expect(ids((await query.listSessions()).records)).toEqual(['kept'])
      expect(await code(query.observeSession('gone'))).toBe('SESSION_QUERY_NOT_FOUND')
    })

    idOrderContract({
      env,
      openQuery: options.openQuery,
      header,
      persist,
      messages,
      search: options.search === true,
    })

    if (options.corruptible === true) {
      it('reports a corrupt persisted log as SESSION_QUERY_CORRUPT_SESSION for that id only', async () => {
        const e = await env()
        if (e.corrupt === undefined) throw new Error('corruptible: true needs createPersistence() fixtures with corrupt(id)')
        await persist(e.persistence, header('good', 1), messages(['fine']))
        await persist(e.persistence, header('bad', 2), messages(['one']))
        await e.persistence.append({ header: header('bad', 2), inheritedEventCount: SessionLogOffset(0) }, messages(['two'], 1))
        await e.corrupt('bad')
        const query = await e.open()
        expect(ids((await query.listSessions()).records)).toEqual(['good', 'bad'])
        const error = await query.observeSession('bad').then(
          () => undefined,
          (x: unknown) => x as { code: string; details?: Record<string, unknown> },
        )
        expect(error?.code).toBe('SESSION_QUERY_CORRUPT_SESSION')
        expect(error?.details).toMatchObject({ id: 'bad' })
        expect(await code(query.readHistory('bad'))).toBe('SESSION_QUERY_CORRUPT_SESSION')
        expect((await query.observeSession('good')).events).toHaveLength(1)
        expect(ids((await query.listSessions({ createdAt: { from: 2 } })).records)).toEqual(['bad'])
      })
    }

    if (options.search === true) {
      async function searchCorpus(): Promise<SessionQuery> {
        const e = await env()
        await persist(e.persistence, header('a', 1), messages(['the otter swims', 'an otter and another otter']))
        await persist(e.persistence, header('b', 2), messages(['otter', 'nothing to see here']))
        for (let i = 0; i < 7; i++) await persist(e.persistence, header(`m${i}`, 10 + i), messages([`otter number ${i}`, `heron ${i}`]))
        const query = await e.open()
        if (query.searchEvents === undefined || query.searchSessions === undefined)
          throw new Error('search: true needs a backend with searchEvents and searchSessions')
        return query
      }

      it('search: every word is required, a repeated word is one term, pages are deterministic', async () => {
        const query = await searchCorpus()
        const all = await query.searchEvents!({ text: 'otter', limit: SEARCH_PAGE_MAX_LIMIT })
        expect(all.hits.map((h) => `${h.id}#${h.seq}`).sort()).toEqual(
          ['a#0', 'a#1', 'b#0', ...Array.from({ length: 7 }, (_, i) => `m${i}#0`)].sort(),
        )
        expect(all.nextCursor).toBeUndefined()
        for (let i = 1; i < all.hits.length; i++) expect(all.hits[i]!.score).toBeLessThanOrEqual(all.hits[i - 1]!.score)
        expect((await query.searchEvents!({ text: 'otter swims' })).hits.map((h) => `${h.id}#${h.seq}`)).toEqual(['a#0'])
        // As many repetitions as the text limit allows: still one term, the same hits.
        const repeated = Array.from({ length: Math.floor((SEARCH_MAX_TEXT + 1) / 6) }, () => 'otter').join(' ')
        expect((await query.searchEvents!({ text: repeated, limit: SEARCH_PAGE_MAX_LIMIT })).hits).toEqual(all.hits)
        const paged: EventSearchHit[] = []
        let cursor: string | undefined
        do {
          const page = await query.searchEvents!({ text: 'otter', limit: 3, ...(cursor === undefined ? {} : { cursor }) })
          paged.push(...page.hits)
          cursor = page.nextCursor
        } while (cursor !== undefined)
        expect(paged).toEqual(all.hits)
        const sessions = await query.searchSessions!({ text: 'otter', limit: SEARCH_PAGE_MAX_LIMIT })
        expect(sessions.hits.map((h) => h.record.header.id).sort()).toEqual(
          ['a', 'b', ...Array.from({ length: 7 }, (_, i) => `m${i}`)].sort(),
        )
        expect(sessions.hits.find((h) => h.record.header.id === 'a')?.matches).toBe(2)
      })

      it("search: marks say which […] of a snippet are matches, so the text's own brackets are never taken for one", async () => {
        const e = await env()
        await persist(e.persistence, header('code', 1), messages(['items[0] and [heron] of otters; items']))
        const query = await e.open()
        const { hits } = await query.searchEvents!({ text: 'items' })
        expect(hits).toHaveLength(1)
        const { snippet, marks } = hits[0]!
        expect(marks.length).toBeGreaterThan(0)
        for (const [start, end] of marks) expect(snippet.slice(start, end).toLowerCase()).toBe('[items]')
        for (const own of ['[0]', '[heron]']) {
          const at = snippet.indexOf(own)
          expect(at, snippet).toBeGreaterThanOrEqual(0)
          expect(marks.some(([start, end]) => start < at + own.length && at < end)).toBe(false)
        }
        // Without the marks' brackets, the snippet is the text as it was stored.
        let plain = snippet
        for (const [start, end] of [...marks].reverse()) plain = plain.slice(0, start) + plain.slice(start + 1, end - 1) + plain.slice(end)
        expect('items[0] and [heron] of otters; items').toContain(plain.replace(/^…|…$/g, '').trim())
      })

      it('search: the protocol limits are typed errors, as are cursors of another search', async () => {
        const query = await searchCorpus()
        const words = Array.from({ length: SEARCH_MAX_TERMS + 1 }, (_, i) => `w${i}x`)
        expect((await query.searchEvents!({ text: words.slice(0, SEARCH_MAX_TERMS).join(' ') })).hits).toEqual([])
        for (const bad of [
          { text: words.join(' ') },
          { text: 'o'.repeat(SEARCH_MAX_TEXT + 1) },
          { text: ' !!! ' },
          { text: 'otter', limit: SEARCH_PAGE_MAX_LIMIT + 1 },
          { text: 'otter', limit: 0 },
        ]) {
          expect(await code(query.searchEvents!(bad)), JSON.stringify(bad).slice(0, 80)).toBe('SESSION_QUERY_INVALID_FILTER')
          expect(await code(query.searchSessions!(bad))).toBe('SESSION_QUERY_INVALID_FILTER')
        }
        const page = await query.searchEvents!({ text: 'otter', limit: 2 })
        expect(await code(query.searchEvents!({ text: 'heron', limit: 2, cursor: page.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        expect(await code(query.searchEvents!({ text: 'otter', cursor: 'not-a-cursor!' }))).toBe('SESSION_QUERY_INVALID_CURSOR')
      })
    }
  })
}
