import { createReaderRole } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { host, keys, turn } from './helpers.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup(options: Omit<Parameters<typeof host>[0], 'pool'> = {}) {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  const h = await host({ pool: db.pool, ...options })
  cleanups.push(() => h.ctx.dispose())
  return { ...h, db }
}

const KEYS = [keys.messages, keys.turns]

// The rules every cache backend shares are the behaviour suite of
// `@dsh/session-projection-cache/testing` (behaviour.spec.ts); these are the
// PostgreSQL cache's own: mirrors of several hosts, its table, its schema.

describe('a read-only postgres cache (a role that may only SELECT)', () => {
  it('answers from the rows other hosts wrote and never writes one: its writes answer false, quietly', async () => {
    const { sessions, projections, cache, db } = await setup()
    const session = sessions.create()
    turn(session, 1, 'hello')
    await cache.idle()
    const pool = new pg.Pool({ connectionString: await createReaderRole(db.url), max: 2 })
    cleanups.push(() => pool.end())
    const reader = await host({ pool, readOnly: true, idPrefix: 'r' })
    cleanups.push(() => reader.ctx.dispose())
    expect(reader.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toEqual(projections.snapshot(session))
    const table = async () =>
      (await db.pool.query('SELECT session_key, key, seq, state FROM dsh_projection_checkpoints ORDER BY 1, 2')).rows
    const before = await table()
    expect(before).toHaveLength(2)
    // A session of the reader's own, through a mandatory write and going cold.
    const own = reader.sessions.create()
    turn(own, 1, 'mine')
    expect(await reader.cache.writeCheckpoint(own)).toBe(false)
    await reader.cache.idle()
    await reader.ctx.dispose()
    expect(await table()).toEqual(before)
    expect(reader.warnings).toEqual([])
  })
})

describe('postgres cachedSnapshot', () => {
  it('hits after the mandatory turn/end write with exactly the live values, on this host and on another', async () => {
    const { sessions, projections, cache, db } = await setup()
    const other = await host({ pool: db.pool, idPrefix: 'o' })
    cleanups.push(() => other.ctx.dispose())
    const session = sessions.create()
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toBeUndefined()
    turn(session, 1, 'hello')
    await cache.idle()
    expect(cache.metrics.writes).toBe(1)
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toEqual(projections.snapshot(session))
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, [keys.turns])).toEqual({ [keys.turns]: 1 })
    // The other host's mirror follows the table (on NOTIFY by itself; refresh() makes it deterministic here).
    await other.cache.refresh()
    expect(other.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toEqual(projections.snapshot(session))
  })

  it('throws SESSION_PROJECTION_CACHE_POISONED on a row that is not JSON or fails the schema; a tampered identity misses', async () => {
    const { sessions, cache, db } = await setup()
    const session = sessions.create()
    turn(session, 1, 'hi')
    await cache.idle()
    const { rows } = await db.pool.query<{ seq: number; state: string }>(
      'SELECT seq, state FROM dsh_projection_checkpoints WHERE key = $1',
      [keys.messages],
    )
    expect(rows).toEqual([{ seq: 3, state: '{"n":1,"last":"hi"}' }])
    for (const state of ['{not json', '{"n":-4,"last":7}', '[]']) {
      await db.pool.query('UPDATE dsh_projection_checkpoints SET state = $1 WHERE key = $2', [state, keys.messages])
      await cache.refresh()
      expect(() => cache.cachedSnapshot(session.header, session.inheritedEventCount, [keys.messages])).toThrow(
        expect.objectContaining({ code: 'SESSION_PROJECTION_CACHE_POISONED' }),
      )
    }
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, [keys.turns])).toEqual({ [keys.turns]: 1 })
    await db.pool.query("UPDATE dsh_projection_checkpoints SET state = $1, identity = identity || 'x'::bytea WHERE key = $2", [
      '{"n":1,"last":"hi"}',
      keys.messages,
    ])
    await cache.refresh()
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, [keys.messages])).toBeUndefined()
  })

  it('never ahead of the log: over the whole PostgreSQL stack, every row seq is below the durable next offset', async () => {
    const { sessions, cache, db, ctx } = await setup({ persist: true, throttle: { events: 3, ms: Infinity } })
    const persistence = ctx.require('sessionPersistence')
    const live = Array.from({ length: 4 }, () => sessions.create())
    for (let round = 1; round <= 5; round++) for (const session of live) turn(session, round, `r${round}`)
    await cache.idle()
    const { rows } = await db.pool.query<{ session_id: Buffer; seq: number }>('SELECT session_id, seq FROM dsh_projection_checkpoints')
    expect(rows.length).toBe(8)
    for (const row of rows) {
      const revision = await persistence.stat(row.session_id.toString('utf8') as never)
      const durable = Number(revision!.split('.')[1])
      expect(row.seq).toBeLessThan(durable)
    }
  })

  it('a table emptied or dropped changes only cost: lookups miss, writes fail softly, nothing throws', async () => {
    const { sessions, cache, db } = await setup()
    const session = sessions.create()
    turn(session, 1, 'a')
    await cache.idle()
    await db.pool.query('DELETE FROM dsh_projection_checkpoints')
    await cache.refresh()
    // A deleted row is not seen by the refresh (it reads committed rows); the mirror lags, which is a correct checkpoint still.
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toEqual({
      [keys.messages]: { n: 1, last: 'a' },
      [keys.turns]: 1,
    })
    await db.pool.query('DROP TABLE dsh_projection_checkpoints')
    turn(session, 2, 'b')
    await cache.idle()
    expect(cache.metrics.failedWrites).toBe(1)
  })
})

describe('postgres cache schema', () => {
  it('refuses a newer cache schema, and an unmigrated one when told not to migrate', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const { createPostgresProjectionCache } = await import('../src/index.js')
    const { createProjectionRegistry } = await import('@dsh/session-projection')
    const { Context } = await import('@dsh/context')
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    const options = {
      pool: db.pool,
      projections: createProjectionRegistry(ctx),
      sessions: { flush: async () => {} },
      logger: { warn: () => {}, error: () => {} },
    }
    await expect(createPostgresProjectionCache({ ...options, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
    })
    const cache = await createPostgresProjectionCache(options)
    cache.close()
    await db.pool.query("UPDATE dsh_schema_version SET version = 5 WHERE component = 'projection-cache'")
    await expect(createPostgresProjectionCache(options)).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW' })
  })
})
