import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createPostgresPersistence, migrate } from '@dsh/session-persistence-postgres'
import { defineSchema, SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '@dsh/session-persistence-postgres/backend'
import { distributionViolations, generateHeaderSessions } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { createPostgresSessionQuery, SEARCH_COMPONENT, SEARCH_MIGRATIONS } from '@dsh/session-query-postgres'
import type pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'

// The search tables sit beside the session tables: hash-partitioned on the
// session's id_key with the same count, every key including it.
const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function openQuery(pool: pg.Pool) {
  const persistence = await createPostgresPersistence({ pool })
  cleanups.push(() => persistence.close())
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  cleanups.push(() => ctx.dispose())
  const query = await createPostgresSessionQuery({
    pool,
    sessions: new SessionStore(ctx),
    persistence,
    logger: { warn: () => {}, error: () => {} },
  })
  cleanups.push(() => query.close())
  return query
}

async function partitions(pool: pg.Pool, table: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = $1::regclass', [table])
  return rows[0]!.n
}

describe('the search tables, partitioned', () => {
  it('a fresh database: the search tables follow the recorded partition count, and the catalog check passes', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    await migrate(db.pool, { partitions: 5 })
    await openQuery(db.pool)
    expect(await distributionViolations(db.pool)).toEqual([])
    expect(await partitions(db.pool, 'dsh_event_text')).toBe(5)
    expect(await partitions(db.pool, 'dsh_search_progress')).toBe(5)
  })

  it('schema 3 sessions and version 1 search rows migrate in place: the same rows, re-keyed, found by search', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    await defineSchema(SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 3)).migrate(db.pool)
    await defineSchema(SEARCH_COMPONENT, SEARCH_MIGRATIONS.slice(0, 1)).migrate(db.pool)
    await generateHeaderSessions(db.pool, { count: 40, events: 3 })
    await db.pool.query(
      `INSERT INTO dsh_event_text (sid, seq, type, body, tsv)
       SELECT sid, 0, 'user/message', 'quokka ' || sid, to_tsvector('simple', 'quokka ' || sid) FROM dsh_sessions`,
    )
    await db.pool.query('INSERT INTO dsh_search_progress (sid, indexed) SELECT sid, next_seq FROM dsh_sessions')
    const before = (await db.pool.query('SELECT sid::text, seq, body FROM dsh_event_text ORDER BY sid, seq')).rows
    const query = await openQuery(db.pool)
    expect(await distributionViolations(db.pool)).toEqual([])
    expect((await db.pool.query('SELECT sid::text, seq, body FROM dsh_event_text ORDER BY sid, seq')).rows).toEqual(before)
    const { rows: keyed } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM dsh_event_text t JOIN dsh_sessions s USING (id_key, sid)',
    )
    expect(keyed).toEqual([{ n: 40 }])
    expect((await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dsh_search_progress')).rows).toEqual([{ n: 40 }])
    const page = await query.searchSessions({ text: 'quokka', limit: 100 })
    expect(page.hits).toHaveLength(40)
  })
})
