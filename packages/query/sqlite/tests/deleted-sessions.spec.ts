import { readdirSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Context } from '@dsh/context'
import { SessionId, type SessionStore, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence, JOURNAL_FILE } from '@dsh/session-persistence-jsonl'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { defaultIndexPath, type SqliteSessionQuery, sqliteSessionQueryPlugin } from '../src/index.js'
import { header, later, message, openQuery, persist, silent, store, tempDir } from './helpers.js'

// What the index holds of a session deleted through the store: every row
// (its session row, its event rows, its full-text rows, its pending mark) is
// removed by the writer's catch-up through the change feed, or by a rescan
// when the feed cannot say; listings and searches, a reader's or the
// writer's, remove nothing.

/** Every table of the index file; a new one must be named here and counted in `leftovers`. */
const TABLES = [
  'event_text',
  'event_text_config',
  'event_text_content',
  'event_text_data',
  'event_text_docsize',
  'event_text_idx',
  'events',
  'meta',
  'pending',
  'sessions',
]

/** What the index file holds of the sessions `ids` (their session rows known as `sids`, their words `words`). */
interface Leftovers {
  readonly sessions: number
  readonly events: number
  /** FTS5 content and document-size rows of their events. */
  readonly text: number
  readonly docsize: number
  /** Terms of the full-text index that only they held. */
  readonly terms: number
  readonly pending: number
}

/** The index's sids of `ids` and the rowids of their events. */
function indexedRows(path: string, ids: readonly string[]): { sids: number[]; rowids: number[] } {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const sids = db
      .prepare('SELECT sid FROM sessions WHERE id IN (SELECT value FROM json_each(?))')
      .pluck()
      .all(JSON.stringify(ids)) as number[]
    const rowids = db
      .prepare('SELECT rowid FROM events WHERE sid IN (SELECT value FROM json_each(?))')
      .pluck()
      .all(JSON.stringify(sids)) as number[]
    return { sids, rowids }
  } finally {
    db.close()
  }
}

function leftovers(path: string, ids: readonly string[], rows: { sids: number[]; rowids: number[] }, words: readonly string[]): Leftovers {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()).toEqual(TABLES)
    // The rest hold no per-session rows: the feed cursor, the epoch and the search generation; FTS5's settings.
    expect(db.prepare('SELECT key FROM meta ORDER BY key').pluck().all()).toEqual(['epoch', 'feed', 'generation'])
    const count = (sql: string, values: readonly unknown[]): number => db.prepare(sql).pluck().get(JSON.stringify(values)) as number
    // The full-text index itself (event_text_data, event_text_idx): its vocabulary, read through a TEMP table of this connection.
    db.exec("CREATE VIRTUAL TABLE temp.vocabulary USING fts5vocab(main, 'event_text', 'row')")
    return {
      sessions: count('SELECT count(*) FROM sessions WHERE id IN (SELECT value FROM json_each(?))', ids),
      events: count('SELECT count(*) FROM events WHERE sid IN (SELECT value FROM json_each(?))', rows.sids),
      text: count('SELECT count(*) FROM event_text_content WHERE id IN (SELECT value FROM json_each(?))', rows.rowids),
      docsize: count('SELECT count(*) FROM event_text_docsize WHERE id IN (SELECT value FROM json_each(?))', rows.rowids),
      terms: count('SELECT count(*) FROM temp.vocabulary WHERE term IN (SELECT value FROM json_each(?))', words),
      pending: count('SELECT count(*) FROM pending WHERE id IN (SELECT value FROM json_each(?))', ids),
    }
  } finally {
    db.close()
  }
}

const NONE: Leftovers = { sessions: 0, events: 0, text: 0, docsize: 0, terms: 0, pending: 0 }

/** Every file beside the index, with size and mtime: equal means nothing was written. */
function files(path: string): string[] {
  const dir = dirname(path)
  return readdirSync(dir)
    .map((name) => {
      const stats = statSync(join(dir, name), { throwIfNoEntry: false })
      return `${name} ${stats?.size ?? '-'} ${stats?.mtimeMs ?? '-'}`
    })
    .sort()
}

/** A writing host over a JSONL root: store, coordinator and the index's writer, whose own passes wait past the test. */
async function host(
  root: string,
): Promise<{ ctx: Context; sessions: SessionStore; persistence: SessionPersistence; query: SqliteSessionQuery }> {
  const ctx = new Context({ logger: silent })
  later(() => ctx.dispose())
  ctx.provide('logger', silent)
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root }), { writeBehindMs: 1 }))
  await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root), indexDelayMs: 600_000 }))
  return {
    ctx,
    sessions: ctx.require('sessions'),
    persistence: ctx.require('sessionPersistence'),
    query: ctx.require('sessionQuery') as SqliteSessionQuery,
  }
}

/** Sessions created through the store, two messages each, the second with a word of their own; then gone cold. */
async function create(sessions: SessionStore, ids: readonly string[]): Promise<void> {
  for (const [i, id] of ids.entries()) {
    const session = sessions.create({ id, cwd: '/work', createdAt: 1000 + i })
    session.append('user/message', { text: `common words of ${id}` })
    session.append('user/message', { text: `only ${wordOf(id)} here` })
    await sessions.dispose(id)
  }
}

function wordOf(id: string): string {
  return `word${id.replace(/[^a-z0-9]/g, '')}`
}

async function ids(query: SqliteSessionQuery, text: string): Promise<string[]> {
  return [...new Set((await query.searchEvents({ text, limit: 100 })).hits.map((h) => h.id))].sort()
}

describe('sessions deleted through the store leave no rows in the sqlite index', () => {
  it("a running writer's catch-up removes every row of a deleted session; the writer's own listings and searches remove none", async () => {
    const root = tempDir()
    const { sessions, persistence, query } = await host(root)
    const path = defaultIndexPath(root)
    const kept = ['keep-0', 'keep-1', 'keep-2']
    const dropped = ['drop-0', 'drop-1', 'drop-2']
    await create(sessions, [...kept, ...dropped, 'fleeting'])
    // Gone cold here and deleted before any pass indexed it.
    expect(await persistence.delete(SessionId('fleeting'))).toBe(true)
    // All seven from memory: one `stat` each, the deleted one's answering that it is gone (no row written).
    expect(await query.reconcile()).toMatchObject({ source: 'feed', fromMemory: 7, read: 0, failed: 0 })
    expect(await ids(query, 'common')).toEqual([...dropped, ...kept].sort())

    const gone = [...dropped, 'fleeting']
    const words = gone.map(wordOf)
    const rows = indexedRows(path, gone)
    expect(rows.sids).toHaveLength(3)
    expect(leftovers(path, gone, rows, words)).toEqual({ sessions: 3, events: 6, text: 6, docsize: 6, terms: 3, pending: 0 })

    for (const id of dropped) expect(await persistence.delete(SessionId(id))).toBe(true)
    // Listings and searches answer without them at once, and remove nothing: that is the catch-up's work.
    expect((await query.listSessions()).records.map((r) => r.header.id).sort()).toEqual(kept)
    expect(await ids(query, 'common')).toEqual(kept)
    expect(await ids(query, words[0]!)).toEqual([])
    expect((await query.searchSessions({ text: words[1]! })).hits).toEqual([])
    expect(leftovers(path, gone, rows, words)).toEqual({ sessions: 3, events: 6, text: 6, docsize: 6, terms: 3, pending: 0 })

    expect(await query.reconcile()).toMatchObject({ source: 'feed', changed: 3, removed: 3, failed: 0 })
    expect(leftovers(path, gone, rows, words)).toEqual(NONE)
    const keptRows = indexedRows(path, kept)
    expect(leftovers(path, kept, keptRows, kept.map(wordOf))).toEqual({ sessions: 3, events: 6, text: 6, docsize: 6, terms: 3, pending: 0 })
    // Nothing else is left: the whole file holds the kept sessions' rows alone.
    const db = new Database(path, { readonly: true })
    try {
      const total = (table: string) => db.prepare(`SELECT count(*) FROM ${table}`).pluck().get()
      expect([total('sessions'), total('events'), total('event_text_content'), total('event_text_docsize'), total('pending')]).toEqual([
        3, 6, 6, 6, 0,
      ])
    } finally {
      db.close()
    }
    expect(await ids(query, 'common')).toEqual(kept)
  })

  it('a writer opening after deletions made elsewhere removes their rows, through the feed or a rescan; a reader meanwhile writes nothing', async () => {
    const root = tempDir()
    const path = defaultIndexPath(root)
    const first = await host(root)
    const kept = ['keep-0', 'keep-1']
    const dropped = ['drop-0', 'drop-1', 'drop-2', 'drop-3']
    await create(first.sessions, [...kept, ...dropped])
    // Closing the writer indexes everything and leaves the file at rest.
    await first.ctx.dispose()
    const rows = indexedRows(path, dropped)
    const words = dropped.map(wordOf)
    expect(leftovers(path, dropped, rows, words)).toEqual({ sessions: 4, events: 8, text: 8, docsize: 8, terms: 4, pending: 0 })

    // Another process deletes two of them.
    const other = createJsonlPersistence({ root })
    later(() => other.close())
    for (const id of dropped.slice(0, 2)) expect(await other.delete(SessionId(id))).toBe(true)

    // A reader answers without them and changes no file.
    const before = files(path)
    const { query: reader } = await openQuery({ sessions: store().sessions, persistence: other, path, readOnly: true })
    expect((await reader.listSessions()).records.map((r) => r.header.id).sort()).toEqual([...kept, ...dropped.slice(2)].sort())
    expect(await ids(reader, 'common')).toEqual([...dropped.slice(2), ...kept].sort())
    expect((await reader.searchSessions({ text: words[0]! })).hits).toEqual([])
    expect(await reader.reconcile()).toMatchObject({ changed: 2, removed: 0 })
    await reader.close()
    expect(files(path)).toEqual(before)
    const some = (n: number) => ({ sessions: n, events: 2 * n, text: 2 * n, docsize: 2 * n, terms: n, pending: 0 })
    expect(leftovers(path, dropped, rows, words)).toEqual(some(4))

    // The next writer catches up through the feed on open.
    const second = await openQuery({ sessions: store().sessions, persistence: other, path, reconcileOnOpen: false })
    expect(await second.query.reconcile()).toMatchObject({ source: 'feed', changed: 2, removed: 2, failed: 0 })
    await second.query.close()
    expect(leftovers(path, dropped, rows, words)).toEqual(some(2))

    // The other two are deleted and the change journal lost: the next writer rescans, and removes them too.
    for (const id of dropped.slice(2)) expect(await other.delete(SessionId(id))).toBe(true)
    await other.close()
    rmSync(join(root, JOURNAL_FILE))
    const again = createJsonlPersistence({ root })
    later(() => again.close())
    const third = await openQuery({ sessions: store().sessions, persistence: again, path, reconcileOnOpen: false })
    expect(await third.query.reconcile()).toMatchObject({ source: 'rescan', listed: 2, removed: 2, failed: 0 })
    expect(leftovers(path, dropped, rows, words)).toEqual(NONE)
    expect((await third.query.listSessions()).records.map((r) => r.header.id).sort()).toEqual(kept)
  })

  it('over rounds of creating and deleting sessions, the file and its full-text index stay within what the first rounds used', async () => {
    const persistence = createMemoryPersistence()
    for (let i = 0; i < 10; i++) await persist(persistence, header(`base-${i}`, i), [message(0, `steady words ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const { query } = await openQuery({ sessions: store().sessions, persistence, path })
    const sizes: Array<{ pages: number; fts: number }> = []
    for (let round = 0; round < 30; round++) {
      for (let i = 0; i < 20; i++) {
        const events = Array.from({ length: 4 }, (_, k) => message(k, `churn${round} text${i} unique${round}x${i}x${k} lorem ipsum dolor`))
        await persist(persistence, header(`r${round}-${i}`, 100 + i), events)
      }
      await query.reconcile()
      for (let i = 0; i < 20; i++) await persistence.delete(SessionId(`r${round}-${i}`))
      expect(await query.reconcile()).toMatchObject({ removed: 20, failed: 0 })
      const db = new Database(path, { readonly: true, fileMustExist: true })
      try {
        const pages = db.pragma('page_count', { simple: true }) as number
        // The full-text index's segments: delete markers that were never merged away would pile up here.
        const fts = db.prepare('SELECT coalesce(sum(length(block)), 0) FROM event_text_data').pluck().get() as number
        sizes.push({ pages, fts })
        expect(db.prepare('SELECT count(*) FROM sessions').pluck().get()).toBe(10)
        expect(db.prepare('SELECT count(*) FROM events').pluck().get()).toBe(10)
      } finally {
        db.close()
      }
    }
    const early = sizes.slice(0, 10)
    const late = sizes.slice(20)
    // Pages freed by deletes are reused: the file does not grow past what the first rounds needed.
    expect(Math.max(...late.map((s) => s.pages))).toBeLessThanOrEqual(Math.max(...early.map((s) => s.pages)))
    expect(Math.max(...late.map((s) => s.fts))).toBeLessThanOrEqual(2 * Math.max(...early.map((s) => s.fts)))
    expect(await ids(query, 'lorem')).toEqual([])
  })
})
