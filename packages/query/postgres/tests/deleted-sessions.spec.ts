import { Context } from '@dsh/context'
import { SessionId, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { createReaderRole } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { createPostgresSessionQuery } from '@dsh/session-query-postgres'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'

// The rows the search index keeps for a session go with the session: a
// session deleted through the store leaves none behind in any table this
// backend owns, whatever the index had caught up with, and nothing a reader
// does removes or adds a row.

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

const quiet = { warn: () => {}, error: () => {} }

/** Base tables (partitioned parents and plain tables, not their partitions) of the database's schema. */
async function tables(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
  )
  return rows.map((r) => r.name)
}

/** Of each table in `owned`: rows of the sessions under `keys` (tables keyed by session), or all rows (any other table). */
async function rowsOf(pool: pg.Pool, owned: readonly string[], keys: readonly Buffer[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const table of owned) {
    const { rowCount } = await pool.query(
      "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'id_key'",
      [table],
    )
    const { rows } = await pool.query<{ n: number }>(
      rowCount === 1
        ? `SELECT count(*)::int AS n FROM ${table} WHERE id_key = ANY($1::bytea[])`
        : `SELECT count(*)::int AS n FROM ${table}`,
      rowCount === 1 ? [keys] : [],
    )
    out[table] = rows[0]!.n
  }
  return out
}

describe('sessions deleted through the store leave no rows in the postgres search index', () => {
  it('no text, progress or other row of a deleted session remains, before or after the writer catches up; readers change no row', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const persistence = await createPostgresPersistence({ pool: db.pool })
    cleanups.push(() => persistence.close())
    const sessionTables = await tables(db.pool)

    // A host: the store, its coordinator writing to PostgreSQL, and the writing query (indexing only when asked).
    const ctx = new Context({ logger: quiet })
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
    const sessions = ctx.require('sessions')
    const store = ctx.require('sessionPersistence')
    const query = await createPostgresSessionQuery({ pool: db.pool, sessions, persistence: store, indexOnNotify: false, logger: quiet })
    cleanups.push(() => query.close())

    // Every table this backend added beside the session tables; a new one must be named here and checked below.
    const owned = (await tables(db.pool)).filter((t) => !sessionTables.includes(t))
    expect(owned).toEqual(['dsh_event_text', 'dsh_search_cursor', 'dsh_search_progress'])

    const kept = ['keep-0', 'keep-1', 'keep-2']
    const dropped = ['drop-0', 'drop-1', 'drop-2']
    // Deleted before any catch-up indexed it.
    const fleeting = 'fleeting'
    for (const [i, id] of [...kept, ...dropped, fleeting].entries()) {
      const session = sessions.create({ id, cwd: '/work', createdAt: 1000 + i })
      session.append('user/message', { text: `common ${id.replace('-', '')} first` })
      session.append('user/message', { text: `common ${id.replace('-', '')} second` })
      await sessions.dispose(id)
    }
    expect(await store.delete(SessionId(fleeting))).toBe(true)
    expect(await query.catchUp()).toEqual({ indexed: 6, failed: 0, damaged: 0 })
    expect((await query.searchSessions({ text: 'common', limit: 50 })).hits.map((h) => h.record.header.id).sort()).toEqual(
      [...dropped, ...kept].sort(),
    )

    const keys = [...dropped, fleeting].map((id) => keyOf(id))
    const sids = (await db.pool.query<{ sid: string }>('SELECT sid FROM dsh_sessions WHERE id_key = ANY($1::bytea[])', [keys])).rows.map(
      (r) => r.sid,
    )
    expect(sids).toHaveLength(dropped.length)
    // Indexed: two text rows and a progress row for each session to delete, the feed cursor stored.
    expect(await rowsOf(db.pool, owned, keys)).toEqual({ dsh_event_text: 6, dsh_search_progress: 3, dsh_search_cursor: 1 })

    // Read-only listing and search, as a role that may only SELECT, change no row (any write would fail too).
    const readerPool = new pg.Pool({ connectionString: await createReaderRole(db.url), max: 2 })
    cleanups.push(() => readerPool.end())
    const readerPersistence = await createPostgresPersistence({ pool: readerPool, readOnly: true })
    cleanups.push(() => readerPersistence.close())
    const reader = await createPostgresSessionQuery({
      pool: readerPool,
      sessions: sessions,
      persistence: readerPersistence,
      readOnly: true,
      logger: quiet,
    })
    cleanups.push(() => reader.close())
    const everything = async () =>
      rowsOf(
        db.pool,
        owned,
        [...kept, ...dropped, fleeting].map((id) => keyOf(id)),
      )
    const reads = async () => {
      const listed = (await reader.listSessions({ limit: 50 })).records.map((r) => r.header.id)
      const found = (await reader.searchEvents({ text: 'common', limit: 50 })).hits.map((h) => h.id)
      const sessionsFound = (await reader.searchSessions({ text: 'drop0' })).hits.map((h) => h.record.header.id)
      return { listed, found, sessionsFound }
    }
    let before = await everything()
    expect((await reads()).sessionsFound).toEqual(['drop-0'])
    expect(await everything()).toEqual(before)

    for (const id of dropped) expect(await store.delete(SessionId(id))).toBe(true)
    // The delete's own transaction took their rows (foreign keys cascading from the session row): nothing waits for a catch-up.
    expect(await rowsOf(db.pool, owned, keys)).toEqual({ dsh_event_text: 0, dsh_search_progress: 0, dsh_search_cursor: 1 })

    // Readers after the delete: the deleted sessions answer no more, and no row changes.
    before = await everything()
    const after = await reads()
    expect(after.listed.sort()).toEqual([...kept].sort())
    expect([...new Set(after.found)].sort()).toEqual([...kept].sort())
    expect(after.sessionsFound).toEqual([])
    expect((await query.listSessions({ limit: 50 })).records.map((r) => r.header.id).sort()).toEqual([...kept].sort())
    expect(await everything()).toEqual(before)

    // The writer's catch-up through the change feed (which names the deleted sessions) writes nothing back for them.
    expect(await query.catchUp()).toEqual({ indexed: 0, failed: 0, damaged: 0 })
    expect(await rowsOf(db.pool, owned, keys)).toEqual({ dsh_event_text: 0, dsh_search_progress: 0, dsh_search_cursor: 1 })
    const bySid = await db.pool.query<{ text: number; progress: number }>(
      `SELECT (SELECT count(*)::int FROM dsh_event_text WHERE sid = ANY($1::bigint[])) AS text,
              (SELECT count(*)::int FROM dsh_search_progress WHERE sid = ANY($1::bigint[])) AS progress`,
      [sids],
    )
    expect(bySid.rows[0]).toEqual({ text: 0, progress: 0 })

    // Only the kept sessions' rows remain: two text rows and one progress row each.
    expect(
      await rowsOf(
        db.pool,
        owned,
        kept.map((id) => keyOf(id)),
      ),
    ).toEqual({
      dsh_event_text: 6,
      dsh_search_progress: 3,
      dsh_search_cursor: 1,
    })
    const totals = await db.pool.query<{ text: number; progress: number }>(
      'SELECT (SELECT count(*)::int FROM dsh_event_text) AS text, (SELECT count(*)::int FROM dsh_search_progress) AS progress',
    )
    expect(totals.rows[0]).toEqual({ text: 6, progress: 3 })

    // A session created again under a deleted id is a new lifecycle: its own rows only, the old text never comes back.
    const again = sessions.create({ id: 'drop-0', cwd: '/work', createdAt: 5000 })
    again.append('user/message', { text: 'common reborn' })
    await sessions.dispose('drop-0')
    expect(await query.catchUp()).toEqual({ indexed: 1, failed: 0, damaged: 0 })
    expect((await query.searchEvents({ text: 'drop0' })).hits).toEqual([])
    expect((await query.searchEvents({ text: 'reborn' })).hits.map((h) => h.id)).toEqual(['drop-0'])
    expect(await rowsOf(db.pool, owned, [keyOf('drop-0')])).toEqual({ dsh_event_text: 1, dsh_search_progress: 1, dsh_search_cursor: 1 })
  })
})
