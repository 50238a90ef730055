import { Context } from '@dsh/context'
import { parseSessionHeader, SessionId, SessionLogOffset, SessionSeq, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { ID_MAX_LENGTH } from '@dsh/session-persistence/backend'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import fc from 'fast-check'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { events, target } from './fixtures.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function database(options: pg.PoolConfig = {}) {
  const db = await freshDatabase(options)
  cleanups.push(() => db.end())
  return db
}

async function open(pool: pg.Pool): Promise<PostgresPersistence> {
  const persistence = await createPostgresPersistence({ pool })
  cleanups.push(() => persistence.close())
  return persistence
}

/**
 * Holds the session row locked from another connection, so that an append
 * waits inside its statement (mid-append) until `release`.
 */
async function blockRow(pool: pg.Pool, id: string): Promise<{ release(): Promise<void> }> {
  const client = await pool.connect()
  await client.query('BEGIN')
  await client.query('SELECT 1 FROM dsh_sessions WHERE id_key = $1 FOR UPDATE', [keyOf(id)])
  return {
    async release() {
      await client.query('ROLLBACK')
      client.release()
    },
  }
}

/** Waits (bounded by count, not time) until a backend waits on a lock with the append statement. */
async function waitingAppender(pool: pg.Pool): Promise<number> {
  for (let attempt = 0; attempt < 5000; attempt++) {
    const { rows } = await pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE dsh_sessions% SET next_seq%'",
    )
    if (rows[0] !== undefined) return rows[0].pid
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error('no append ever waited on the blocked row')
}

describe('one writer per session across hosts', () => {
  it("a second host's append to a held session is LOCKED; the lease comes free when the holder closes", async () => {
    const db = await database()
    const a = await open(db.pool)
    const b = await open(db.pool)
    await a.append(target('shared'), events(0, 2))
    await expect(b.append(target('shared'), events(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(b.load(SessionId('shared'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(b.delete(SessionId('shared'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    // Reads are never locked.
    expect((await b.inspect(SessionId('shared'))).events).toHaveLength(2)
    await a.close()
    expect((await b.append(target('shared'), events(2, 1))).nextSeq).toBe(3)
  })

  it('the writer connection killed by pg_terminate_backend: the lease goes with it and another host takes over', async () => {
    const db = await database()
    const a = await open(db.pool)
    const b = await open(db.pool)
    await a.append(target('victim'), events(0, 1))
    const { rows } = await db.pool.query<{ pid: number }>(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    expect(rows).toHaveLength(1)
    await db.pool.query('SELECT pg_terminate_backend($1, 60000)', [rows[0]!.pid])
    expect((await b.append(target('victim'), events(1, 1))).nextSeq).toBe(2)
    // A's next write must win the lease again: B holds it now.
    await expect(a.append(target('victim'), events(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
  })
})

describe('faults', () => {
  it('pg_terminate_backend of the writer mid-append: a typed error, no partial batch, the retry succeeds', async () => {
    const db = await database()
    const p = await open(db.pool)
    await p.append(target('mid'), events(0, 3))
    const blocker = await blockRow(db.pool, 'mid')
    // Settled into a value at once: the rejection lands while this test awaits other things.
    const outcome = p.append(target('mid'), events(3, 2)).then(
      () => 'acknowledged',
      (error: unknown) => error,
    )
    const pid = await waitingAppender(db.pool)
    await db.pool.query('SELECT pg_terminate_backend($1, 60000)', [pid])
    expect(await outcome).toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
    await blocker.release()
    expect((await p.inspect(SessionId('mid'))).events).toHaveLength(3)
    expect((await p.append(target('mid'), events(3, 2))).nextSeq).toBe(5)
    expect((await p.inspect(SessionId('mid'))).events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
  })

  it("the coordinator's retry lands a batch whose writer was terminated mid-append, exactly once", async () => {
    const db = await database()
    const persistence = await createPostgresPersistence({ pool: db.pool })
    const quiet = { warn: () => {}, error: () => {} }
    const ctx = new Context({ logger: quiet })
    ctx.provide('logger', quiet)
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0, retryDelayMs: 1, maxRetryDelayMs: 20 }))
    const sessions = ctx.require('sessions')
    const session = sessions.create({ id: 'coordinated' })
    session.append('user/message', { text: 'first' })
    await sessions.flush(session)
    const blocker = await blockRow(db.pool, 'coordinated')
    session.append('user/message', { text: 'second' })
    session.append('user/message', { text: 'third' })
    const flushed = sessions.flush(session).then(
      () => 'flushed',
      (error: unknown) => error,
    )
    const pid = await waitingAppender(db.pool)
    await db.pool.query('SELECT pg_terminate_backend($1, 60000)', [pid])
    // The flush reports the failed attempt; the events stay queued and the coordinator retries on its own.
    expect(await flushed).toMatchObject({ code: 'SESSION_FLUSH_FAILED' })
    await blocker.release()
    await sessions.flush(session)
    const stored = await persistence.inspect(SessionId('coordinated'))
    expect(stored.events.map((e) => (e.data as { text: string }).text)).toEqual(['first', 'second', 'third'])
  })

  it('a statement timeout is a typed, retryable error and commits nothing', async () => {
    const db = await database()
    // Migration and the first append run without a timeout, so only the blocked append can meet it.
    const setup = await createPostgresPersistence({ pool: db.pool })
    await setup.append(target('slow'), events(0, 1))
    await setup.close()
    const timed = new pg.Pool({ connectionString: db.url, max: 4, statement_timeout: 2_000 })
    cleanups.push(() => timed.end())
    const p = await open(timed)
    const blocker = await blockRow(db.pool, 'slow')
    const error = await p.append(target('slow'), events(1, 1)).catch((e: unknown) => e)
    await blocker.release()
    expect(error).toMatchObject({ code: 'SESSION_PERSISTENCE_IO', details: { sqlState: '57014' } })
    expect((error as Error).message).toMatch(/timed out/)
    expect((await p.inspect(SessionId('slow'))).events).toHaveLength(1)
    expect((await p.append(target('slow'), events(1, 1))).nextSeq).toBe(2)
  })

  it('a database with a newer schema version is refused, and never migrated down', async () => {
    const db = await database()
    const p = await open(db.pool)
    await p.append(target('kept'), events(0, 1))
    await db.pool.query("UPDATE dsh_schema_version SET version = 99 WHERE component = 'sessions'")
    await expect(createPostgresPersistence({ pool: db.pool })).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW' })
    await expect(createPostgresPersistence({ pool: db.pool, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW',
    })
    const { rows } = await db.pool.query("SELECT version FROM dsh_schema_version WHERE component = 'sessions'")
    expect(rows[0].version).toBe(99)
    expect((await p.inspect(SessionId('kept'))).events).toHaveLength(1)
  })

  it('an unmigrated database opened with migrate: false is refused with the command that fixes it', async () => {
    const db = await database()
    await expect(createPostgresPersistence({ pool: db.pool, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      message: expect.stringMatching(/dsh migrate/),
    })
    await expect(createPostgresPersistence({})).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS' })
  })

  it('a damaged batch is CORRUPT, never dropped', async () => {
    const db = await database()
    const p = await open(db.pool)
    await p.append(target('flip'), events(0, 2))
    await p.append(target('flip'), events(2, 2))
    await db.pool.query('UPDATE dsh_batches SET checksum = checksum # 1 WHERE first_seq = 2')
    await expect(p.inspect(SessionId('flip'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    await db.pool.query('UPDATE dsh_batches SET checksum = checksum # 1, body = substring(body from 1 for 6) WHERE first_seq = 2')
    await expect(p.inspect(SessionId('flip'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    expect(await p.list()).toHaveLength(1)
  })
})

describe('ids and data round-trip through parameters only', () => {
  it('arbitrary ids (any Unicode, quotes, backslashes, up to ID_MAX_LENGTH) round-trip through append, list, inspect, stat and delete', async () => {
    const db = await database()
    const p = await open(db.pool)
    const id = fc
      .oneof(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        fc.string({ unit: fc.constantFrom("'", '"', '\\', '\u0001', ';', '--', '$1', 'é', '🦀', '\u202e'), minLength: 1, maxLength: 30 }),
        // A binary unit is a code point: at most two UTF-16 code units; each id gets a prefix of a few.
        fc.string({ unit: 'binary', minLength: 1, maxLength: (ID_MAX_LENGTH - 8) / 2 }),
        fc.constantFrom("x'); DROP TABLE dsh_sessions; --", 'L'.repeat(ID_MAX_LENGTH - 8), '\\x00', '$$ $1 $$'),
        // A NUL is no id (the API cannot name it): INVALID_ID on every backend, as the contract suite checks.
      )
      .filter((raw) => !raw.includes('\u0000'))
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(id, { minLength: 1, maxLength: 4 }), async (ids) => {
        const round = ++n
        const stored = ids.map((raw) => `${round}:${raw}`)
        for (const raw of stored) await p.append(target(raw), events(0, 1, raw))
        const listed = new Set((await p.list()).map((r) => r.header.id as string))
        for (const raw of stored) {
          expect(listed.has(raw)).toBe(true)
          const observation = await p.inspect(SessionId(raw))
          expect(observation.header.id).toBe(raw)
          expect(observation.events[0]!.data).toEqual({ text: `${raw}0` })
          expect(await p.stat(SessionId(raw))).toBe(observation.revision)
        }
        for (const raw of stored) expect(await p.delete(SessionId(raw))).toBe(true)
        for (const raw of stored) expect(await p.stat(SessionId(raw))).toBeUndefined()
      }),
      { numRuns: 40 },
    )
    expect(await p.list()).toEqual([])
    expect((await db.pool.query('SELECT count(*)::int AS n FROM dsh_sessions')).rows[0].n).toBe(0)
  })

  it('an id with a lone surrogate (no UTF-8 form) is INVALID_ID and stores nothing', async () => {
    const db = await database()
    const p = await open(db.pool)
    // Built past `parseSessionHeader`, which refuses such an id itself: the backend refuses it too.
    const odd = { ...target('a'), header: { ...target('a').header, id: SessionId('a\ud800b') } }
    await expect(p.append(odd, events(0, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_INVALID_ID' })
    expect(await p.stat(SessionId('a\ud800b'))).toBeUndefined()
    expect(await p.list()).toEqual([])
  })
})

describe('change feed across hosts', () => {
  it('a subscriber is told of another host’s commit without polling, and the feed names the id', async () => {
    const db = await database()
    const a = await open(db.pool)
    const b = await open(db.pool)
    const start = await b.changes()
    let told = 0
    let wake: (() => void) | undefined
    const subscription = await b.subscribe(() => {
      told++
      wake?.()
    })
    cleanups.push(() => subscription.close())
    const notified = new Promise<void>((resolve) => {
      wake = resolve
    })
    await a.append(target('news'), events(0, 1))
    await notified
    expect(told).toBeGreaterThanOrEqual(1)
    const changes = await b.changes(start.cursor)
    expect(changes).toMatchObject({ rescan: false, ids: ['news'] })
  })
})

describe('lease budget', () => {
  it('keeps at most maxLeases leases; an evicted session can be written by another host, and this one then gets LOCKED', async () => {
    const db = await database()
    const a = await createPostgresPersistence({ pool: db.pool, maxLeases: 2 })
    cleanups.push(() => a.close())
    const b = await open(db.pool)
    for (const id of ['one', 'two', 'three']) await a.append(target(id), events(0, 1))
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    expect(rows[0]!.n).toBe(2)
    // 'one' was least recently written: its lease went back.
    expect((await b.append(target('one'), events(1, 1))).nextSeq).toBe(2)
    await expect(a.append(target('one'), events(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(b.append(target('three'), events(1, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    // Still writable by the holder, continuing from the stored offset.
    expect((await a.append(target('three'), events(1, 1))).nextSeq).toBe(2)
    await expect(createPostgresPersistence({ pool: db.pool, maxLeases: 0 })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
    })
  })
})

describe('read-only, verify and damaged headers', () => {
  it('a read-only instance reads, never writes, takes no lease and refuses an unmigrated database', async () => {
    const db = await database()
    await expect(createPostgresPersistence({ pool: db.pool, readOnly: true })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
    })
    const writer = await open(db.pool)
    await writer.append(target('open-turn'), [{ type: 'turn/start', seq: SessionSeq(0), time: 1, data: { turn: 1 } }])
    await writer.append(target('clean'), events(0, 2))
    await writer.close()
    const reader = await createPostgresPersistence({ pool: db.pool, readOnly: true })
    cleanups.push(() => reader.close())
    expect(reader.readOnly).toBe(true)
    expect((await reader.list()).length).toBe(2)
    expect((await reader.load(SessionId('clean'))).repaired).toBe(false)
    await expect(reader.load(SessionId('open-turn'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    await expect(reader.append(target('clean'), events(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    await expect(reader.delete(SessionId('clean'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    expect((await reader.inspect(SessionId('open-turn'))).events).toHaveLength(1)
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    expect(rows[0]!.n).toBe(0)
  })

  it('verify reads every batch (a fork’s source prefix included) and names the source; a damaged header is listed apart', async () => {
    const db = await database()
    const p = await open(db.pool)
    await p.append(target('source'), events(0, 3))
    const child = parseSessionHeader({
      version: 1,
      id: 'fork',
      createdAt: 1_700_000_000_000,
      isSeeded: true,
      delegationDepth: 1,
      parentSession: 'source',
    })
    const seed = (await p.inspect(SessionId('source'))).events
    await p.append({ header: child, inheritedEventCount: SessionLogOffset(3), forkSource: SessionId('source') }, [
      ...seed,
      ...events(3, 1, 'own'),
    ])
    const report = await p.verify(SessionId('fork'))
    expect(report).toMatchObject({ id: 'fork', events: 4, tornBytes: 0, forkSource: 'source' })
    expect(report.committedBytes).toBeGreaterThan(0)
    // The fork stored only its own event; the prefix stays the source's.
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT sum(b.count)::int AS n FROM dsh_batches b JOIN dsh_sessions s USING (sid) WHERE s.id = convert_to('fork', 'UTF8')",
    )
    expect(rows[0]!.n).toBe(1)
    await db.pool.query("UPDATE dsh_sessions SET header = '{not a header' WHERE id = convert_to('source', 'UTF8')")
    expect((await p.list()).map((r) => r.header.id)).toEqual(['fork'])
    expect(p.damagedLogs()).toEqual([expect.objectContaining({ code: 'SESSION_PERSISTENCE_CORRUPT' })])
    await expect(p.verify(SessionId('source'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })
})

describe('opening', () => {
  it('an unreachable server is POSTGRES_PERSISTENCE_UNAVAILABLE, with the address and no credentials in the message', async () => {
    const { createServer } = await import('node:net')
    // A port that was free a moment ago and has nothing listening now.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const address = server.address() as { port: number }
        server.close(() => resolve(address.port))
      })
    })
    const error = await createPostgresPersistence({ connectionString: `postgres://someone:s3cret@127.0.0.1:${port}/nowhere` }).catch(
      (e: unknown) => e,
    )
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_UNAVAILABLE' })
    expect((error as Error).message).toContain(`127.0.0.1:${port}/nowhere`)
    expect((error as Error).message).not.toContain('s3cret')
  })
})

describe('forks by reference', () => {
  it('a seed that does not match the source’s committed prefix is CONFLICT and stores nothing', async () => {
    const db = await database()
    const p = await open(db.pool)
    await p.append(target('origin'), events(0, 3))
    const child = parseSessionHeader({
      version: 1,
      id: 'liar',
      createdAt: 1_700_000_000_000,
      isSeeded: true,
      delegationDepth: 1,
      parentSession: 'origin',
    })
    const forged = [
      ...events(0, 2),
      { type: 'user/message', seq: SessionSeq(2), time: 2, data: { text: 'never said' } },
      ...events(3, 1, 'own'),
    ]
    await expect(
      p.append({ header: child, inheritedEventCount: SessionLogOffset(3), forkSource: SessionId('origin') }, forged),
    ).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
    expect(await p.stat(SessionId('liar'))).toBeUndefined()
  })
})
