import { Context } from '@dsh/context'
import { SessionId, SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { createReaderRole, generateHeaderSessions } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { createPostgresSessionQuery } from '@dsh/session-query-postgres'
import { headerOf } from '@dsh/test-kit'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

function message(seq: number, text: string): StoredSessionEvent {
  return { type: 'user/message', seq: SessionSeq(seq), time: 1, data: { text } }
}

/**
 * A database with sessions written by `writer` (a persistence with no query
 * beside it, so nothing indexes their text), and a read-only query over it as
 * a role that may only SELECT: any write it tried would fail. `writerQuery`
 * indexes on the owner's pool when a test asks it to.
 */
async function setup(limits: { overlayLimit?: number; overlayTextLimit?: number } = {}) {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  const writer = await createPostgresPersistence({ pool: db.pool })
  cleanups.push(() => writer.close())
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  cleanups.push(() => ctx.dispose())
  // The search tables exist once a writing query has opened (it migrates them); it never catches up on its own here.
  const writerQuery = await createPostgresSessionQuery({
    pool: db.pool,
    sessions: new SessionStore(ctx),
    persistence: writer,
    indexOnNotify: false,
    logger: { warn: () => {}, error: () => {} },
  })
  cleanups.push(() => writerQuery.close())
  const readerPool = new pg.Pool({ connectionString: await createReaderRole(db.url), max: 4 })
  cleanups.push(() => readerPool.end())
  // Every statement the reader's query and persistence send, as text, and the rows each one returned.
  const statements: string[] = []
  const returned: Array<{ text: string; rows: number }> = []
  const send = readerPool.query.bind(readerPool) as (...args: unknown[]) => unknown
  readerPool.query = ((config: string | pg.QueryConfig, ...rest: unknown[]) => {
    const text = typeof config === 'string' ? config : config.text
    statements.push(text)
    const result = send(config, ...rest)
    if (result instanceof Promise) {
      result.then(
        (r: pg.QueryResult) => void returned.push({ text, rows: r.rows.length }),
        () => {},
      )
    }
    return result
  }) as pg.Pool['query']
  const reader = await createPostgresPersistence({ pool: readerPool, readOnly: true })
  cleanups.push(() => reader.close())
  const warnings: string[] = []
  const logger = { warn: (message: string) => void warnings.push(message), error: (message: string) => void warnings.push(message) }
  const query = await createPostgresSessionQuery({
    pool: readerPool,
    sessions: new SessionStore(ctx),
    persistence: reader,
    readOnly: true,
    logger,
    ...limits,
  })
  cleanups.push(() => query.close())
  const indexRows = async () =>
    (
      await db.pool.query<{ text: number; progress: number }>(
        'SELECT (SELECT count(*)::int FROM dsh_event_text) AS text, (SELECT count(*)::int FROM dsh_search_progress) AS progress',
      )
    ).rows[0]
  const append = (id: string, events: StoredSessionEvent[]) =>
    writer.append({ header: headerOf(id, { createdAt: 1000 }), inheritedEventCount: SessionLogOffset(0) }, events)
  return { db, writer, writerQuery, reader, query, statements, returned, warnings, indexRows, append }
}

describe('a read-only postgres search (a role that may only SELECT)', () => {
  it('finds the text the index lacks beside the text it has, counts each event once, follows changes and deletes, and writes nothing', async () => {
    const { writerQuery, query, warnings, indexRows, append, writer } = await setup()
    await append('alpha', [message(0, 'the zebra crossing'), message(1, 'zebra stripes')])
    await append('beta', [message(0, 'a lonely zebra')])

    const ids = async () => (await query.searchEvents({ text: 'zebra' })).hits.map((h) => [h.id, h.seq]).sort()
    expect(await ids()).toEqual([
      ['alpha', 0],
      ['alpha', 1],
      ['beta', 0],
    ])
    expect(await indexRows()).toEqual({ text: 0, progress: 0 })

    // A writer indexes alpha and beta; one more alpha batch is not indexed: index and memory overlap on nothing.
    await writerQuery.catchUp()
    await append('alpha', [message(2, 'zebra again')])
    expect(await indexRows()).toEqual({ text: 3, progress: 2 })
    const sessions = await query.searchSessions({ text: 'zebra' })
    expect(sessions.hits.map((h) => [h.record.header.id, h.matches]).sort()).toEqual([
      ['alpha', 3],
      ['beta', 1],
    ])
    expect(sessions.hits.find((h) => h.record.header.id === 'alpha')!.record.revision).toBe(await writer.stat(SessionId('alpha')))
    expect((await query.searchEvents({ text: 'again' })).hits.map((h) => [h.id, h.seq, h.snippet])).toEqual([['alpha', 2, 'zebra [again]']])

    // A session the writer deletes answers no more.
    await writer.delete(SessionId('beta'))
    expect(await ids()).toEqual([
      ['alpha', 0],
      ['alpha', 1],
      ['alpha', 2],
    ])
    await expect(query.catchUp()).rejects.toMatchObject({ code: 'POSTGRES_QUERY_READ_ONLY' })
    // Only the writer's delete changed the index (beta's rows went with its session).
    expect(await indexRows()).toEqual({ text: 2, progress: 1 })
    expect(warnings).toEqual([])
  })

  it('starts from the cursor a writer stored: reads the sessions changed since, not every session', async () => {
    const { writerQuery, query, reader, append } = await setup()
    for (const id of ['one', 'two', 'three']) await append(id, [message(0, `quoll ${id}`)])
    await writerQuery.catchUp()
    await append('late', [message(0, 'quoll late')])
    expect((await query.searchSessions({ text: 'quoll' })).hits).toHaveLength(4)
    expect(reader.metrics.rescans).toBe(0)
    expect(reader.metrics.bodyReads).toBe(1)
  })

  it('pages with cursors over index and memory together, and a change makes the cursor stale', async () => {
    const { query, append } = await setup()
    await append(
      'many',
      Array.from({ length: 25 }, (_, i) => message(i, `needle number ${i}`)),
    )
    const first = await query.searchEvents({ text: 'needle', limit: 10 })
    const second = await query.searchEvents({ text: 'needle', limit: 10, cursor: first.nextCursor! })
    const third = await query.searchEvents({ text: 'needle', limit: 10, cursor: second.nextCursor! })
    expect(third.nextCursor).toBeUndefined()
    const seqs = [...first.hits, ...second.hits, ...third.hits].map((hit) => hit.seq).sort((x, y) => x - y)
    expect(seqs).toEqual(Array.from({ length: 25 }, (_, i) => i))
    await append('many', [message(25, 'needle again')])
    await expect(query.searchEvents({ text: 'needle', limit: 10, cursor: first.nextCursor! })).rejects.toMatchObject({
      code: 'SESSION_QUERY_STALE_CURSOR',
    })
  })

  it('reads a session again only when it changed, and reports a log it cannot read once', async () => {
    const { db, query, reader, warnings, append } = await setup()
    await append('kept', [message(0, 'okapi')])
    await append('broken', [message(0, 'okapi too')])
    await db.pool.query(
      `UPDATE dsh_batches SET body = overlay(body placing '\\x00000000'::bytea from 1 for 4) WHERE sid = (SELECT sid FROM dsh_sessions WHERE id_key = $1)`,
      [keyOf('broken')],
    )
    expect((await query.searchEvents({ text: 'okapi' })).hits.map((h) => h.id)).toEqual(['kept'])
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain("reading the text of session 'broken' failed")
    const reads = () => reader.metrics.bodyReads
    const before = reads()
    expect(before).toBeGreaterThan(0)
    expect((await query.searchEvents({ text: 'okapi' })).hits.map((h) => h.id)).toEqual(['kept'])
    expect(reads()).toBe(before)
    expect(warnings).toHaveLength(1)
    await append('kept', [message(1, 'okapi twice')])
    expect((await query.searchEvents({ text: 'twice' })).hits.map((h) => h.id)).toEqual(['kept'])
    expect(reads()).toBeGreaterThan(before)
  })

  it('answers SESSION_QUERY_INDEX_UNAVAILABLE past overlayLimit sessions, and again once a writer has indexed them', async () => {
    const { writerQuery, query, append } = await setup({ overlayLimit: 2 })
    for (const id of ['one', 'two', 'three']) await append(id, [message(0, 'pangolin')])
    await expect(query.searchEvents({ text: 'pangolin' })).rejects.toMatchObject({
      code: 'SESSION_QUERY_INDEX_UNAVAILABLE',
      message: expect.stringContaining('lacks the text of more than the 2 sessions'),
    })
    await writerQuery.catchUp()
    expect((await query.searchSessions({ text: 'pangolin' })).hits).toHaveLength(3)
  })

  it('refusing past overlayLimit reads no more than overlayLimit + 1 of the sessions the index lacks, at every search', async () => {
    const { db, query, returned } = await setup({ overlayLimit: 2 })
    await generateHeaderSessions(db.pool, { count: 40, events: 1 })
    const lookups = () => returned.filter((r) => r.text.includes('LEFT JOIN dsh_search_progress')).map((r) => r.rows)
    for (let i = 0; i < 2; i++) {
      await expect(query.searchEvents({ text: 'm0' })).rejects.toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE' })
    }
    expect(lookups()).toEqual([3, 3])
  })

  it('answers SESSION_QUERY_INDEX_UNAVAILABLE past overlayTextLimit characters held, and again once that text is indexed', async () => {
    const { writerQuery, query, append } = await setup({ overlayTextLimit: 1_000 })
    await append('small', [message(0, 'armadillo')])
    expect((await query.searchEvents({ text: 'armadillo' })).hits).toHaveLength(1)
    await append('large', [message(0, `armadillo ${'x'.repeat(600)}`), message(1, `armadillo ${'y'.repeat(600)}`)])
    await expect(query.searchEvents({ text: 'armadillo' })).rejects.toMatchObject({
      code: 'SESSION_QUERY_INDEX_UNAVAILABLE',
      message: expect.stringContaining('more than the 1000 characters'),
    })
    await writerQuery.catchUp()
    expect((await query.searchEvents({ text: 'armadillo' })).hits).toHaveLength(3)
  })

  it('searches the index through its GIN index while memory holds rows', async () => {
    const { db, query, statements, append } = await setup()
    await append('gin', [message(0, 'tapir')])
    await query.searchEvents({ text: 'tapir' })
    const text = statements.find((statement) => statement.includes('UNION ALL'))
    expect(text).toBeDefined()
    const client = await db.pool.connect()
    try {
      // With sequential scans priced out, only a GIN lookup can read the index's rows: a filter it cannot take would still scan.
      await client.query('BEGIN')
      await client.query('SET LOCAL enable_seqscan = off')
      const values = ['tapir', 11, 0, [keyOf('gin')], ['1'], [0], ['user/message'], ['tapir'], 'MaxWords=24, MinWords=6']
      const plan = (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n')
      expect(plan).not.toMatch(/Seq Scan on dsh_event_text/)
      expect(plan).toMatch(/Bitmap Index Scan on dsh_event_text_p\d+_tsv_idx/)
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  })
})

describe('a read-only postgres query opens without writing', () => {
  it('refuses an unmigrated database rather than migrating it', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const writer = await createPostgresPersistence({ pool: db.pool })
    cleanups.push(() => writer.close())
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    await expect(
      createPostgresSessionQuery({ pool: db.pool, sessions: new SessionStore(ctx), persistence: writer, readOnly: true }),
    ).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED' })
    const tables = await db.pool.query("SELECT 1 FROM pg_class WHERE relname = 'dsh_event_text'")
    expect(tables.rowCount).toBe(0)
    await expect(
      createPostgresSessionQuery({ pool: db.pool, sessions: new SessionStore(ctx), persistence: writer, readOnly: true, overlayLimit: -1 }),
    ).rejects.toMatchObject({ code: 'POSTGRES_QUERY_INVALID_OPTIONS' })
    await expect(
      createPostgresSessionQuery({
        pool: db.pool,
        sessions: new SessionStore(ctx),
        persistence: writer,
        readOnly: true,
        overlayTextLimit: 1.5,
      }),
    ).rejects.toMatchObject({ code: 'POSTGRES_QUERY_INVALID_OPTIONS', message: expect.stringContaining('overlayTextLimit') })
  })
})
