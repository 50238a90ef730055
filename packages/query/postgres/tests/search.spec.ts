import { Context } from '@dsh/context'
import { SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { createPostgresSessionQuery, type PostgresSessionQuery } from '@dsh/session-query-postgres'
import { headerOf } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** A fresh database with the session tables, one persistence over it and an empty store (all closed after the test). */
async function base() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  const persistence = await createPostgresPersistence({ pool: db.pool })
  cleanups.push(() => persistence.close())
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  cleanups.push(() => ctx.dispose())
  return { db, persistence, ctx, sessions: new SessionStore(ctx) }
}

/** `base()` and a query that indexes only when asked (no LISTEN), with the warnings it reports. */
async function watched() {
  const { db, persistence, ctx } = await base()
  const warnings: string[] = []
  const query = await createPostgresSessionQuery({
    pool: db.pool,
    sessions: new SessionStore(ctx),
    persistence,
    indexOnNotify: false,
    logger: { warn: (message: string) => void warnings.push(message), error: () => {} },
  })
  cleanups.push(() => query.close())
  return { db, persistence, query, warnings }
}

async function open(): Promise<{ persistence: PostgresPersistence; query: PostgresSessionQuery; other: PostgresSessionQuery }> {
  const { db, persistence, ctx, sessions } = await base()
  const logger = { warn: () => {}, error: () => {} }
  const query = await createPostgresSessionQuery({ pool: db.pool, sessions, persistence, logger })
  cleanups.push(() => query.close())
  // A second host's query over the same database (its own persistence instance, same tables).
  const otherPersistence = await createPostgresPersistence({ pool: db.pool })
  cleanups.push(() => otherPersistence.close())
  const other = await createPostgresSessionQuery({ pool: db.pool, sessions: new SessionStore(ctx), persistence: otherPersistence, logger })
  cleanups.push(() => other.close())
  return { persistence, query, other }
}

function header(id: string, createdAt = 1000) {
  return headerOf(id, { createdAt })
}

function message(seq: number, text: string, type = 'user/message'): StoredSessionEvent {
  return {
    type,
    seq: SessionSeq(seq),
    time: 1,
    data: type === 'tool/call' ? { turn: 1, callId: 'c', name: 'grep', arguments: { pattern: text } } : { text },
  }
}

describe('postgres search (tsvector + GIN)', () => {
  it('finds events and sessions by every word, follows new batches and deletes, on any host', async () => {
    const { persistence, query, other } = await open()
    const a = header('alpha', 1000)
    const b = header('b\'ta \\ "quoted"', 2000)
    await persistence.append({ header: a, inheritedEventCount: SessionLogOffset(0) }, [
      message(0, 'the zebra crossing'),
      message(1, 'zebra stripes everywhere'),
      message(2, 'zebra', 'tool/call'),
    ])
    await persistence.append({ header: b, inheritedEventCount: SessionLogOffset(0) }, [message(0, 'a lonely zebra \u0000 with nul')])

    const events = await query.searchEvents({ text: 'Zebra' })
    expect(events.hits.map((h) => [h.id, h.seq]).sort()).toEqual(
      [
        ['alpha', 0],
        ['alpha', 1],
        ['alpha', 2],
        [b.id, 0],
      ].sort(),
    )
    expect(events.hits.every((h) => h.snippet.includes('[zebra]'))).toBe(true)
    const both = await query.searchEvents({ text: 'zebra stripes' })
    expect(both.hits.map((h) => [h.id, h.seq])).toEqual([['alpha', 1]])

    const sessions = await other.searchSessions({ text: 'zebra' })
    expect(sessions.hits.map((h) => [h.record.header.id, h.matches]).sort()).toEqual(
      [
        ['alpha', 3],
        [b.id, 1],
      ].sort(),
    )
    expect(sessions.hits.find((h) => h.record.header.id === 'alpha')!.record.revision).toBe(await persistence.stat(a.id))

    // A batch that lands later is found by the next search, on the other host too.
    await persistence.append({ header: b, inheritedEventCount: SessionLogOffset(0) }, [message(1, 'giraffe neck')])
    expect((await other.searchEvents({ text: 'giraffe' })).hits.map((h) => [h.id, h.seq])).toEqual([[b.id, 1]])

    // A deleted session answers no more.
    await persistence.delete(a.id)
    expect((await query.searchEvents({ text: 'stripes' })).hits).toEqual([])
  })

  it('pages with cursors bound to the search and the index generation', async () => {
    const { persistence, query } = await open()
    const h = header('many')
    await persistence.append(
      { header: h, inheritedEventCount: SessionLogOffset(0) },
      Array.from({ length: 25 }, (_, i) => message(i, `needle number ${i}`)),
    )
    const first = await query.searchEvents({ text: 'needle', limit: 10 })
    expect(first.hits).toHaveLength(10)
    const second = await query.searchEvents({ text: 'needle', limit: 10, cursor: first.nextCursor! })
    const third = await query.searchEvents({ text: 'needle', limit: 10, cursor: second.nextCursor! })
    expect(third.nextCursor).toBeUndefined()
    const seqs = [...first.hits, ...second.hits, ...third.hits].map((hit) => hit.seq).sort((x, y) => x - y)
    expect(seqs).toEqual(Array.from({ length: 25 }, (_, i) => i))
    await expect(query.searchEvents({ text: 'other', cursor: first.nextCursor! })).rejects.toMatchObject({
      code: 'SESSION_QUERY_INVALID_CURSOR',
    })
    await persistence.append({ header: h, inheritedEventCount: SessionLogOffset(0) }, [message(25, 'needle again')])
    await expect(query.searchEvents({ text: 'needle', limit: 10, cursor: first.nextCursor! })).rejects.toMatchObject({
      code: 'SESSION_QUERY_STALE_CURSOR',
    })
  })

  it('rejects requests without words, and SQL in the text is only words', async () => {
    const { persistence, query } = await open()
    await persistence.append({ header: header('s'), inheritedEventCount: SessionLogOffset(0) }, [
      message(0, "robert'); DROP TABLE dsh_sessions; --"),
    ])
    await expect(query.searchEvents({ text: '  !!  ' })).rejects.toMatchObject({ code: 'SESSION_QUERY_INVALID_FILTER' })
    expect((await query.searchEvents({ text: "robert'); DROP TABLE dsh_sessions; --" })).hits).toHaveLength(1)
    expect((await query.listSessions()).records).toHaveLength(1)
  })
})

describe('postgres search starts from the stored cursor', () => {
  it('a new instance reads the feed from where the last complete pass stored it, not every session; a cursor the feed cannot continue means one full pass', async () => {
    const { db, persistence, ctx } = await base()
    const quiet = { warn: () => {}, error: () => {} }
    const open = async () => {
      const own = await createPostgresPersistence({ pool: db.pool })
      cleanups.push(() => own.close())
      const query = await createPostgresSessionQuery({
        pool: db.pool,
        sessions: new SessionStore(ctx),
        persistence: own,
        indexOnNotify: false,
        logger: quiet,
      })
      cleanups.push(() => query.close())
      return { own, query }
    }
    for (const id of ['one', 'two', 'three']) {
      await persistence.append({ header: header(id), inheritedEventCount: SessionLogOffset(0) }, [message(0, `wombat ${id}`)])
    }
    const first = await open()
    expect(await first.query.catchUp()).toEqual({ indexed: 3, failed: 0, damaged: 0 })
    expect(first.own.metrics.rescans).toBe(1)
    const stored = (await db.pool.query<{ cursor: string }>('SELECT cursor FROM dsh_search_cursor')).rows
    expect(stored).toHaveLength(1)
    await persistence.append({ header: header('late'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'wombat late')])

    // Only the session changed since: one indexed, no rescan.
    const second = await open()
    expect(await second.query.catchUp()).toEqual({ indexed: 1, failed: 0, damaged: 0 })
    expect(second.own.metrics.rescans).toBe(0)
    expect((await second.query.searchSessions({ text: 'wombat' })).hits).toHaveLength(4)
    expect((await db.pool.query<{ cursor: string }>('SELECT cursor FROM dsh_search_cursor')).rows).not.toEqual(stored)

    await db.pool.query("UPDATE dsh_search_cursor SET cursor = 'not a cursor'")
    await db.pool.query('DELETE FROM dsh_search_progress WHERE sid = (SELECT sid FROM dsh_sessions WHERE id_key = $1)', [keyOf('two')])
    const third = await open()
    expect(await third.query.catchUp()).toEqual({ indexed: 1, failed: 0, damaged: 0 })
    expect(third.own.metrics.rescans).toBe(1)
  })
})

describe('postgres search when its cursor cannot be stored', () => {
  it('indexes and answers all the same, with one warning per failed store', async () => {
    const { db, persistence, query, warnings } = await watched()
    await db.pool.query(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`)
    await db.pool.query('CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON dsh_search_cursor FOR EACH ROW EXECUTE FUNCTION refuse()')
    await persistence.append({ header: header('kept'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'bilby')])
    expect((await query.searchEvents({ text: 'bilby' })).hits.map((h) => h.id)).toEqual(['kept'])
    expect(warnings).toEqual([expect.stringContaining('storing where the search index is complete up to failed')])
    expect((await db.pool.query('SELECT 1 FROM dsh_search_cursor')).rowCount).toBe(0)
  })
})

describe('postgres search and a damaged log', () => {
  it('a damaged log is reported once and left out until it changes: the pass completes, the cursor moves, the next catch-up reads nothing', async () => {
    const { db, persistence, query, warnings } = await watched()
    await persistence.append({ header: header('kept'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'numbat')])
    await persistence.append({ header: header('broken'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'numbat too')])
    await db.pool.query(
      `UPDATE dsh_batches SET body = overlay(body placing '\\x00000000'::bytea from 1 for 4) WHERE sid = (SELECT sid FROM dsh_sessions WHERE id_key = $1)`,
      [keyOf('broken')],
    )
    expect(await query.catchUp()).toEqual({ indexed: 1, failed: 0, damaged: 1 })
    expect(warnings).toEqual([expect.stringContaining("the log of session 'broken' is damaged")])
    expect((await db.pool.query('SELECT 1 FROM dsh_search_cursor')).rowCount).toBe(1)
    const reads = persistence.metrics.bodyReads
    expect((await query.searchEvents({ text: 'numbat' })).hits.map((h) => h.id)).toEqual(['kept'])
    expect(persistence.metrics.bodyReads).toBe(reads)
    expect(warnings).toHaveLength(1)
    // It changes (here: a repair appends to it); the feed names it and it is read again.
    await persistence.append({ header: header('broken'), inheritedEventCount: SessionLogOffset(0) }, [message(1, 'numbat again')])
    await query.catchUp()
    expect(persistence.metrics.bodyReads).toBeGreaterThan(reads)
  })
})

describe('postgres search and a damaged header row', () => {
  it('searchSessions leaves its session out, as listing does, and answers with the others', async () => {
    const { persistence, query } = await watched()
    await persistence.append({ header: header('good', 1), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'dingo')])
    await persistence.append({ header: header('bad', 2), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'dingo too')])
    await persistence.append({ header: header('odd', 3), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'dingo three')])
    await query.catchUp()
    await persistence.pool.query("UPDATE dsh_sessions SET header = '{not json' WHERE id = convert_to('bad', 'UTF8')")
    await persistence.pool.query("UPDATE dsh_sessions SET header = '[]' WHERE id = convert_to('odd', 'UTF8')")
    expect((await query.searchSessions({ text: 'dingo' })).hits.map((h) => h.record.header.id)).toEqual(['good'])
  })
})

describe('postgres catch-up and cancellation', () => {
  it("one caller's abort cancels that caller only: a search and a catch-up waiting on the same follow-up still answer", async () => {
    const { persistence, query } = await watched()
    await persistence.append({ header: header('kept'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'wallaby')])
    const running = query.catchUp()
    const controller = new AbortController()
    // These three arrive during the running catch-up: they share the one that follows it.
    const aborted = query.catchUp(controller.signal)
    const search = query.searchEvents({ text: 'wallaby' })
    const plain = query.catchUp()
    controller.abort()
    await expect(aborted).rejects.toMatchObject({ code: 'CANCELLED' })
    expect(await running).toEqual({ indexed: 1, failed: 0, damaged: 0 })
    expect(await plain).toEqual({ indexed: 0, failed: 0, damaged: 0 })
    expect((await search).hits.map((h) => h.id)).toEqual(['kept'])
  })
})

describe('postgres listing faults', () => {
  it('leaves a damaged header row out; a failing statement is SESSION_QUERY_PERSISTENCE_FAILED', async () => {
    const { persistence, query } = await open()
    await persistence.append({ header: header('good', 1), inheritedEventCount: SessionLogOffset(0) }, [])
    await persistence.append({ header: header('bad', 2), inheritedEventCount: SessionLogOffset(0) }, [])
    await persistence.pool.query("UPDATE dsh_sessions SET header = '[]' WHERE id = convert_to('bad', 'UTF8')")
    expect((await query.listSessions()).records.map((r) => r.header.id)).toEqual(['good'])
    await persistence.pool.query('ALTER TABLE dsh_sessions RENAME TO dsh_sessions_elsewhere')
    await expect(query.listSessions()).rejects.toMatchObject({ code: 'SESSION_QUERY_PERSISTENCE_FAILED' })
    await persistence.pool.query('ALTER TABLE dsh_sessions_elsewhere RENAME TO dsh_sessions')
    expect((await query.listSessions({ limit: 1 })).records.map((r) => r.header.id)).toEqual(['good'])
  })
})

describe('postgres query schema', () => {
  it('refuses a newer search schema, and an unmigrated one when told not to migrate', async () => {
    const { db, persistence, sessions } = await base()
    await expect(createPostgresSessionQuery({ pool: db.pool, sessions, persistence, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
    })
    const query = await createPostgresSessionQuery({ pool: db.pool, sessions, persistence, indexOnNotify: false })
    await query.close()
    await db.pool.query("UPDATE dsh_schema_version SET version = 7 WHERE component = 'search'")
    await expect(createPostgresSessionQuery({ pool: db.pool, sessions, persistence })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW',
    })
    await expect(createPostgresSessionQuery({ pool: db.pool, sessions, persistence, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW',
    })
  })
})

describe('postgres search follows the change channel', () => {
  it('indexes a batch that lands on another host without any search asking for it', async () => {
    const { persistence } = await open()
    // `open` started two query backends that LISTEN; this append is another host's write for both.
    await persistence.append({ header: header('landed'), inheritedEventCount: SessionLogOffset(0) }, [message(0, 'quokka sighting')])
    let rows = 0
    for (let attempt = 0; attempt < 2000 && rows === 0; attempt++) {
      rows = (await persistence.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM dsh_event_text WHERE body LIKE '%quokka%'"))
        .rows[0]!.n
      if (rows === 0) await new Promise((resolve) => setTimeout(resolve, 10))
    }
    expect(rows).toBe(1)
  })
})
