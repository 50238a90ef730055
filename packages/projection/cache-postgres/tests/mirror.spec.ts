import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { afterEach, describe, expect, it } from 'vitest'
import { DEFAULT_MIRROR_SESSIONS } from '../src/index.js'
import { host, keys, turn } from './helpers.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const KEYS = [keys.messages, keys.turns]

async function database() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  return db
}

async function hostOn(pool: Awaited<ReturnType<typeof database>>['pool'], idPrefix: string, mirrorSessions: number) {
  const h = await host({ pool, idPrefix, mirrorSessions })
  cleanups.push(() => h.ctx.dispose())
  return h
}

describe('the mirror is an LRU of sessions', () => {
  it('40 sessions through a mirror of 8: it never holds more than 8, every lookup answers the exact rows or misses, and a miss reads the session from the table', async () => {
    const db = await database()
    const bound = 8
    const writer = await hostOn(db.pool, 'w', bound)
    const live = Array.from({ length: 40 }, () => writer.sessions.create())
    for (const [i, session] of live.entries()) {
      turn(session, 1, `s${i}`)
      await writer.cache.idle()
      expect(writer.cache.mirror.sessions).toBeLessThanOrEqual(bound)
    }
    // Its own writes come back through NOTIFY and refresh: sessions may be dropped more than once.
    expect(writer.cache.mirror.evictions).toBeGreaterThanOrEqual(40 - bound)
    // Another host opens: it holds the rows of the most recently written sessions, up to its bound.
    const reader = await hostOn(db.pool, 'r', bound)
    expect(reader.cache.mirror).toMatchObject({ sessions: bound, rows: bound * KEYS.length, loads: 0 })
    const expected = (i: number) => writer.projections.snapshot(live[i]!)
    const lookup = (i: number) => reader.cache.cachedSnapshot(live[i]!.header, live[i]!.inheritedEventCount, KEYS)
    for (let i = 40 - bound; i < 40; i++) expect(lookup(i)).toEqual(expected(i))
    expect(reader.cache.mirror.loads).toBe(0)
    // The others miss once, are read from the table, then hit with exactly their rows.
    for (let i = 0; i < 40 - bound; i++) {
      expect(lookup(i)).toBeUndefined()
      await reader.cache.mirrorIdle()
      expect(reader.cache.mirror.sessions).toBeLessThanOrEqual(bound)
      expect(lookup(i)).toEqual(expected(i))
    }
    expect(reader.cache.mirror.loads).toBe(40 - bound)
    // A whole listing's worth of misses at once: read in one go, the mirror still within its bound.
    for (let i = 0; i < 40; i++) lookup(i)
    await reader.cache.mirrorIdle()
    expect(reader.cache.mirror.sessions).toBeLessThanOrEqual(bound)
    expect(reader.cache.mirror.rows).toBeLessThanOrEqual(bound * KEYS.length)
    for (let i = 40 - bound; i < 40; i++) expect(lookup(i)).toEqual(expected(i))
  })

  it('a session with no rows is read once and then known empty; a later write of it by another host reaches the mirror', async () => {
    const db = await database()
    const writer = await hostOn(db.pool, 'w', 4)
    const reader = await hostOn(db.pool, 'r', 4)
    const session = writer.sessions.create()
    const lookup = () => reader.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)
    expect(lookup()).toBeUndefined()
    await reader.cache.mirrorIdle()
    expect(reader.cache.mirror.loads).toBe(1)
    expect(lookup()).toBeUndefined()
    await reader.cache.mirrorIdle()
    expect(reader.cache.mirror.loads).toBe(1)
    turn(session, 1, 'late')
    await writer.cache.idle()
    await reader.cache.refresh()
    expect(lookup()).toEqual(writer.projections.snapshot(session))
  })

  it('the bound is configurable, 10,000 sessions by default; a bad one is refused', async () => {
    const db = await database()
    const h = await host({ pool: db.pool })
    cleanups.push(() => h.ctx.dispose())
    expect(h.cache.mirror.limit).toBe(DEFAULT_MIRROR_SESSIONS)
    expect(DEFAULT_MIRROR_SESSIONS).toBe(10_000)
    for (const bad of [0, -1, 2.5, Number.NaN])
      await expect(hostOn(db.pool, 'bad', bad)).rejects.toMatchObject({ code: 'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS' })
  })
})
