import type { Context } from '@dsh/context'
import { type SessionHeader, SessionId, SessionLogOffset } from '@dsh/session'
import { type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { createReaderRole } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { FORGET_EVERY_COLD } from '@dsh/session-projection-cache/backend'
import { cacheTestHost, testUnits } from '@dsh/session-projection-cache/testing'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { type PostgresProjectionCache, postgresProjectionCachePlugin, readCheckpointStates } from '../src/index.js'
import { keys, turn } from './helpers.js'

// The rows of a session deleted from the store go on the cache's own writer
// path (its scheduler's forgetting passes over persistence's change feed:
// when it starts, every FORGET_EVERY_COLD sessions gone cold, when it
// closes), never on a read. Real PostgreSQL persistence and cache on one database, rows counted
// in dsh_projection_checkpoints.

const KEYS = [keys.messages, keys.turns]
const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function database() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  return db
}

/** A host on `pool`: the store, PostgreSQL persistence, the registry, then the cache (after persistence, as hosts compose it). */
async function host(pool: pg.Pool, options: { readOnly?: boolean; idPrefix?: string } = {}) {
  const readOnly = options.readOnly === true
  let persistence: SessionPersistence | undefined
  const h = await cacheTestHost({
    idPrefix: options.idPrefix ?? 's',
    throttle: { events: Infinity, ms: Infinity },
    before: async (ctx: Context) => {
      persistence = await createPostgresPersistence({ pool, ...(readOnly ? { readOnly, migrate: false } : {}) })
      await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
    },
    activate: (ctx, throttle) =>
      ctx.activate(
        postgresProjectionCachePlugin({
          pool,
          ...(throttle === undefined ? {} : { throttle }),
          ...(readOnly ? { readOnly, migrate: false } : {}),
        }),
      ),
  })
  let disposed = false
  const dispose = async () => {
    if (disposed) return
    disposed = true
    await h.ctx.dispose()
  }
  cleanups.push(dispose)
  return { ...h, cache: h.cache as PostgresProjectionCache, persistence: persistence!, dispose }
}

/** Rows stored in the table for each of `ids`. */
async function rowsOf(pool: pg.Pool, ids: readonly string[]): Promise<number[]> {
  const { rows } = await pool.query<{ id: string; n: number }>(
    `SELECT i.id, (SELECT count(*)::int FROM dsh_projection_checkpoints c WHERE c.session_id = convert_to(i.id, 'UTF8')) AS n
     FROM unnest($1::text[]) WITH ORDINALITY AS i(id, o) ORDER BY i.o`,
    [ids],
  )
  return rows.map((row) => row.n)
}

/** `count` sessions with one turn each, gone cold (each written at its turn/end and when it went cold). */
async function coldSessions(h: Awaited<ReturnType<typeof host>>, count: number): Promise<SessionHeader[]> {
  const headers: SessionHeader[] = []
  for (let i = 0; i < count; i++) {
    const session = h.sessions.create()
    turn(session, 1, `turn of ${session.id}`)
    headers.push(session.header)
    await h.sessions.dispose(session.id)
  }
  await h.cache.idle()
  return headers
}

async function deleteAll(persistence: SessionPersistence, headers: readonly SessionHeader[]): Promise<void> {
  for (const header of headers) expect(await persistence.delete(SessionId(header.id))).toBe(true)
}

const idsOf = (headers: readonly SessionHeader[]) => headers.map((h) => h.id)

describe('the rows of deleted sessions (postgres)', () => {
  it('are deleted when the writer that deleted them closes; until then lookups, readCheckpointStates and a read-only host delete nothing', async () => {
    const db = await database()
    const writer = await host(db.pool)
    const headers = await coldSessions(writer, 6)
    const deleted = headers.filter((_, i) => i % 2 === 0)
    const kept = headers.filter((_, i) => i % 2 === 1)
    expect(await rowsOf(db.pool, idsOf(headers))).toEqual([2, 2, 2, 2, 2, 2])
    await deleteAll(writer.persistence, deleted)

    // Reads alone: the writer's lookups, a listing's read of states, and a whole read-only host on a role that may only SELECT.
    for (const header of deleted) expect(writer.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    const entries = deleted.map((header) => ({ header, inheritedEventCount: 0 }))
    const states = await readCheckpointStates(db.pool, entries, [{ key: keys.turns, stateVersion: testUnits.turns.stateVersion }])
    expect(states).toEqual(deleted.map(() => ({ [keys.turns]: { ended: 1 } })))
    const readerPool = new pg.Pool({ connectionString: await createReaderRole(db.url), max: 4 })
    cleanups.push(() => readerPool.end())
    const readOnly = await host(readerPool, { readOnly: true, idPrefix: 'r' })
    for (const header of deleted) {
      readOnly.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)
      await readOnly.cache.mirrorIdle()
      expect(readOnly.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    }
    await readOnly.cache.idle()
    await readOnly.dispose()
    expect(readOnly.warnings).toEqual([])
    expect(readOnly.cache.metrics.forgotten).toBe(0)
    expect(writer.cache.metrics.forgotten).toBe(0)
    expect(await rowsOf(db.pool, idsOf(deleted))).toEqual([2, 2, 2])

    // The writer's close: its last forgetting pass.
    await writer.dispose()
    expect(writer.cache.metrics.forgotten).toBe(3)
    expect(await rowsOf(db.pool, idsOf(deleted))).toEqual([0, 0, 0])
    expect(await rowsOf(db.pool, idsOf(kept))).toEqual([2, 2, 2])
    expect(writer.warnings).toEqual([])
  })

  it('are deleted by the first pass of a host started after another host deleted them, from the feed (no rescan)', async () => {
    const db = await database()
    const first = await host(db.pool)
    const headers = await coldSessions(first, 5)
    await first.dispose()
    // A process without a cache deletes two sessions.
    const bare = await createPostgresPersistence({ pool: db.pool })
    await deleteAll(bare, headers.slice(0, 2))
    await bare.close()
    expect(await rowsOf(db.pool, idsOf(headers))).toEqual([2, 2, 2, 2, 2])

    const next = await host(db.pool, { idPrefix: 'n' })
    await next.cache.idle()
    expect(next.cache.metrics.forgotten).toBe(2)
    expect(next.persistence.metrics.rescans).toBe(0)
    expect(await rowsOf(db.pool, idsOf(headers))).toEqual([0, 0, 2, 2, 2])
    for (const header of headers.slice(2)) {
      next.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)
      await next.cache.mirrorIdle()
      expect(next.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    }
  })

  it(`are deleted by a running host once ${FORGET_EVERY_COLD} sessions went cold, and leave its mirror`, async () => {
    const db = await database()
    const h = await host(db.pool)
    const headers = await coldSessions(h, 3)
    await deleteAll(h.persistence, headers.slice(0, 2))
    const heldBefore = h.cache.mirror.sessions
    // The pass comes as the FORGET_EVERY_COLD-th session goes cold, and not before.
    let added = 0
    for (let cold = headers.length; cold < FORGET_EVERY_COLD; cold++) {
      expect(h.cache.metrics.forgotten).toBe(0)
      await coldSessions(h, 1)
      added++
    }
    expect(h.cache.metrics.forgotten).toBe(2)
    expect(await rowsOf(db.pool, idsOf(headers))).toEqual([0, 0, 2])
    expect(h.cache.mirror.sessions).toBe(heldBefore + added - 2)
    expect(h.cache.cachedSnapshot(headers[0]!, SessionLogOffset(0), KEYS)).toBeUndefined()
  })

  it('are found by a rescan when the feed cannot vouch (no stored cursor)', async () => {
    const db = await database()
    const first = await host(db.pool)
    const headers = await coldSessions(first, 4)
    await first.dispose()
    const bare = await createPostgresPersistence({ pool: db.pool })
    await deleteAll(bare, headers.slice(0, 1))
    await bare.close()
    await db.pool.query('DELETE FROM dsh_projection_cache_feed')

    const next = await host(db.pool, { idPrefix: 'n' })
    await next.cache.idle()
    expect(next.persistence.metrics.rescans).toBe(1)
    expect(next.cache.metrics.forgotten).toBe(1)
    expect(await rowsOf(db.pool, idsOf(headers))).toEqual([0, 2, 2, 2])
    expect(next.warnings).toEqual([])
  })
})
