import { existsSync, statSync } from 'node:fs'
import { Context } from '@dsh/context'
import { type Session, SessionLogOffset, sessionStorePlugin } from '@dsh/session'
import { createProjectionRegistry, sessionProjectionsPlugin } from '@dsh/session-projection'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { projectionCachePath, SqliteProjectionCache, sessionProjectionCachePlugin } from '../src/index.js'
import { brittleUnit, host, messagesUnit, tempDir, turn, turnsUnit } from './helpers.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup(options: Omit<Parameters<typeof host>[0], 'path'> = {}) {
  const { dir, cleanup } = tempDir()
  const path = projectionCachePath(dir)
  const h = await host({ path, throttle: { events: Infinity, ms: Infinity }, ...options })
  cleanups.push(cleanup, () => h.ctx.dispose())
  return { ...h, dir, path }
}

const KEYS = ['messages', 'turns'] as const

describe('cachedSnapshot', () => {
  it('hits after the mandatory turn/end write with exactly the live values', async () => {
    const { sessions, projections, cache } = await setup()
    const session = sessions.create()
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toBeUndefined()
    turn(session, 1, 'hello')
    await cache.idle()
    expect(cache.metrics.writes).toBe(1)
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toEqual(projections.snapshot(session))
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, ['turns'])).toEqual({ turns: 1 })
    expect(cache.metrics).toMatchObject({ hits: 2, misses: 1 })
  })

  it('misses on another lifecycle of the same id, another cut, another stateVersion and an unregistered key', async () => {
    const { sessions, cache, path, ctx } = await setup()
    const session = sessions.create({ id: 'same' })
    turn(session, 1, 'first life')
    await cache.idle()
    const { header } = session
    expect(cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    expect(cache.cachedSnapshot({ ...header, createdAt: header.createdAt + 1 }, SessionLogOffset(0), KEYS)).toBeUndefined()
    expect(cache.cachedSnapshot(header, SessionLogOffset(1), KEYS)).toBeUndefined()
    expect(cache.cachedSnapshot({ ...header, id: 'other' as never }, SessionLogOffset(0), KEYS)).toBeUndefined()
    expect(cache.cachedSnapshot(header, SessionLogOffset(0), ['brittle'])).toBeUndefined()
    await ctx.dispose()

    // Another process where `turns` is at another stateVersion: its rows are ignored.
    const next = await host({ path, units: [messagesUnit, { ...turnsUnit, stateVersion: 3 }] })
    cleanups.push(() => next.ctx.dispose())
    expect(next.cache.cachedSnapshot(header, SessionLogOffset(0), ['messages'])).toEqual({ messages: { n: 1, last: 'first life' } })
    expect(next.cache.cachedSnapshot(header, SessionLogOffset(0), ['turns'])).toBeUndefined()
    expect(next.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeUndefined()
  })

  it('keeps one checkpoint per session: a new lifecycle of the id replaces the old rows', async () => {
    const { sessions, cache } = await setup()
    const first = sessions.create({ id: 'x', createdAt: 1 })
    turn(first, 1, 'old')
    await sessions.dispose('x')
    const second = sessions.create({ id: 'x', createdAt: 2 })
    turn(second, 1, 'new')
    await cache.idle()
    expect(cache.cachedSnapshot(first.header, SessionLogOffset(0), KEYS)).toBeUndefined()
    expect(cache.cachedSnapshot(second.header, SessionLogOffset(0), KEYS)).toEqual({ messages: { n: 1, last: 'new' }, turns: 1 })
  })

  it('serves a seeded child by its exact cut', async () => {
    const { sessions, projections, cache } = await setup()
    const parent = sessions.create()
    turn(parent, 1, 'p')
    const child = sessions.fork(parent)
    turn(child, 2, 'c')
    await cache.idle()
    expect(cache.cachedSnapshot(child.header, SessionLogOffset(4), KEYS)).toEqual(projections.snapshot(child))
    expect(cache.cachedSnapshot(child.header, SessionLogOffset(0), KEYS)).toBeUndefined()
  })

  it('throws SESSION_PROJECTION_CACHE_POISONED on a row that is not JSON or fails the schema', async () => {
    const { sessions, cache, path } = await setup()
    const session = sessions.create()
    turn(session, 1, 'hi')
    await cache.idle()
    const db = new Database(path)
    cleanups.push(() => db.close())
    const stored = db.prepare("SELECT payload FROM checkpoint_rows WHERE key = 'messages'").pluck().get() as string
    const witness = stored.slice(0, stored.indexOf('\n') + 1)
    expect(stored.slice(witness.length)).toBe('[3,{"n":1,"last":"hi"}]')
    for (const payload of ['[3, {not json', '[3, {"n":-4,"last":7}]', '{"n":1,"last":"a"}', '[]', '[-2, {"n":1,"last":"a"}]']) {
      db.prepare('UPDATE checkpoint_rows SET payload = ? WHERE key = ?').run(witness + payload, 'messages')
      expect(() => cache.cachedSnapshot(session.header, session.inheritedEventCount, ['messages'])).toThrow(
        expect.objectContaining({ code: 'SESSION_PROJECTION_CACHE_POISONED' }),
      )
    }
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, ['turns'])).toEqual({ turns: 1 })
    // A payload whose witness names another lifecycle (here: another createdAt) is a miss, never a value.
    expect(witness).toMatch(/n\d{13}/)
    db.prepare('UPDATE checkpoint_rows SET payload = ? WHERE key = ?').run(
      `${witness.replace(/n(\d{13})/, (_, createdAt: string) => `n${Number(createdAt) + 1}`)}[3,{"n":1,"last":"hi"}]`,
      'messages',
    )
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, ['messages'])).toBeUndefined()
  })

  it('reproduces a failed unit as an absent key, like the live snapshot', async () => {
    const { sessions, projections, cache } = await setup({ units: [messagesUnit, turnsUnit, brittleUnit] })
    const session = sessions.create()
    session.append('turn/start', { turn: 1 })
    session.append('tool/call', { turn: 1, callId: 'c', name: 'n', arguments: null })
    session.append('turn/end', { turn: 1, reason: 'completed' })
    await cache.idle()
    const live = projections.snapshot(session)
    expect(live).toEqual({ messages: { n: 0, last: null }, turns: 1 })
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, ['messages', 'turns', 'brittle'])).toEqual(live)
  })
})

describe('writes', () => {
  it('flushes the log before a row is written: the row never claims an event the flush did not cover', async () => {
    const flushedUpTo: number[] = []
    let release: (() => void) | undefined
    const { sessions, cache, path } = await setup({
      onFlush: async (session: Session) => {
        const upTo = session.seq - 1
        await new Promise<void>((resolve) => (release = resolve))
        flushedUpTo.push(upTo)
      },
    })
    const session = sessions.create()
    turn(session, 1, 'a')
    // While the flush is pending, the session keeps growing.
    turn(session, 2, 'b')
    turn(session, 3, 'c')
    const db = new Database(path, { readonly: true })
    cleanups.push(() => db.close())
    const seqs = () => db.prepare('SELECT seq FROM checkpoint_rows').pluck().all() as number[]
    expect(seqs()).toEqual([])
    while (cache.metrics.writes < 2) {
      release?.()
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    await cache.idle()
    // First write: the turn 1 rows, after the flush that covered seq 3.
    expect(flushedUpTo[0]).toBe(3)
    for (const seq of seqs()) expect(seq).toBeLessThanOrEqual(Math.max(...flushedUpTo))
    expect(Math.max(...seqs())).toBe(11)
  })

  it('fails softly when the flush fails: no row, a warning, failedWrites counted', async () => {
    const { sessions, cache, warnings } = await setup({
      onFlush: () => {
        throw new Error('disk full')
      },
    })
    const session = sessions.create()
    turn(session, 1, 'a')
    await cache.idle()
    expect(cache.metrics).toMatchObject({ writes: 0, failedWrites: 1 })
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toBeUndefined()
    expect(warnings.some((w) => /checkpoint of session 's1' failed/.test(w.message))).toBe(true)
  })

  it('writes every N events and T ms after the first unwritten event', async () => {
    const byCount = await setup({ throttle: { events: 5, ms: Infinity } })
    const a = byCount.sessions.create()
    const append = async (from: number, to: number) => {
      for (let i = from; i < to; i++) a.append('user/message', { text: `m${i}` })
      await byCount.cache.idle()
    }
    await append(0, 4)
    expect(byCount.cache.metrics.writes).toBe(0)
    await append(4, 5)
    expect(byCount.cache.metrics.writes).toBe(1)
    await append(5, 12)
    expect(byCount.cache.metrics.writes).toBe(2)
    expect(byCount.cache.cachedSnapshot(a.header, a.inheritedEventCount, ['messages'])).toEqual({ messages: { n: 10, last: 'm9' } })
    // A threshold reached while a write is in flight is not lost: one
    // follow-up write, when the first settles, covers every event so far.
    await append(12, 22)
    expect(byCount.cache.metrics.writes).toBe(4)
    expect(byCount.cache.cachedSnapshot(a.header, a.inheritedEventCount, ['messages'])).toEqual({ messages: { n: 22, last: 'm21' } })

    const byTime = await setup({ throttle: { events: Infinity, ms: 20 } })
    const b = byTime.sessions.create()
    b.append('user/message', { text: 'x' })
    b.append('user/message', { text: 'y' })
    expect(byTime.cache.metrics.writes).toBe(0)
    while (byTime.cache.metrics.writes === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    await byTime.cache.idle()
    expect(byTime.cache.metrics.writes).toBe(1)
    expect(byTime.cache.cachedSnapshot(b.header, b.inheritedEventCount, ['messages'])).toEqual({ messages: { n: 2, last: 'y' } })
  })

  it('writes the final cells when a session goes cold, and the disposer writes live sessions with unwritten events', async () => {
    const { sessions, cache, ctx, path } = await setup()
    const cold = sessions.create()
    const live = sessions.create()
    turn(cold, 1, 'a')
    cold.append('user/message', { text: 'after the turn' })
    live.append('user/message', { text: 'never a turn/end' })
    await cache.idle()
    expect(cache.cachedSnapshot(cold.header, cold.inheritedEventCount, ['messages'])).toEqual({ messages: { n: 1, last: 'a' } })
    await sessions.dispose(cold.id)
    expect(cache.cachedSnapshot(cold.header, cold.inheritedEventCount, ['messages'])).toEqual({
      messages: { n: 2, last: 'after the turn' },
    })
    expect(cache.cachedSnapshot(live.header, live.inheritedEventCount, ['messages'])).toBeUndefined()
    await ctx.dispose()
    const reopened = new SqliteProjectionCache({ path, projections: ctxlessProjections(), sessions: { flush: async () => {} } })
    cleanups.push(() => reopened.close())
    expect(reopened.cachedSnapshot(live.header, live.inheritedEventCount, ['messages'])).toEqual({
      messages: { n: 1, last: 'never a turn/end' },
    })
  })

  it('the last write wins, even over a lifecycle with an identical header and a longer log', async () => {
    const { sessions, cache } = await setup()
    const first = sessions.create({ id: 'twin', createdAt: 5 })
    turn(first, 1, 'a')
    turn(first, 2, 'b')
    await sessions.dispose('twin')
    const second = sessions.create({ id: 'twin', createdAt: 5 })
    expect(second.header).toEqual(first.header)
    turn(second, 1, 'only turn')
    await cache.idle()
    expect(cache.cachedSnapshot(second.header, second.inheritedEventCount, KEYS)).toEqual({
      messages: { n: 1, last: 'only turn' },
      turns: 1,
    })
  })

  it('a closed cache misses and refuses writes without throwing', async () => {
    const { sessions, cache } = await setup()
    const session = sessions.create()
    cache.close()
    turn(session, 1, 'a')
    expect(await cache.writeCheckpoint(session)).toBe(false)
    expect(cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)).toBeUndefined()
  })
})

describe('sessionProjectionCachePlugin', () => {
  it('fails at activation without the projection registry', async () => {
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await expect(ctx.activate(sessionProjectionCachePlugin({ path: '/unused' }))).rejects.toMatchObject({
      code: 'CONTEXT_SERVICE_UNAVAILABLE',
      details: { service: 'sessionProjections' },
    })
  })

  it('refuses options without a location or with a bad throttle', async () => {
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await expect(ctx.activate(sessionProjectionCachePlugin({}))).rejects.toMatchObject({ code: 'SESSION_PROJECTION_CACHE_INVALID_OPTIONS' })
    const { dir, cleanup } = tempDir()
    cleanups.push(cleanup)
    for (const throttle of [{ events: 0 }, { ms: Number.NaN }, { events: -3 }]) {
      await expect(ctx.activate(sessionProjectionCachePlugin({ root: dir, throttle }))).rejects.toMatchObject({
        code: 'SESSION_PROJECTION_CACHE_INVALID_OPTIONS',
      })
    }
    expect(ctx.get('sessionProjectionCache')).toBeUndefined()
  })

  it('keeps its database under the session root', async () => {
    const { dir, cleanup } = tempDir()
    cleanups.push(cleanup)
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await ctx.activate(sessionProjectionCachePlugin({ root: dir }))
    expect(projectionCachePath(dir)).toBe(`${dir}/.dsh/projections.sqlite`)
    expect(existsSync(projectionCachePath(dir))).toBe(true)
    // Private: the derived directory 0700, the file and its WAL companions 0600.
    const session = ctx.require('sessions').create()
    session.append('user/message', { text: 'private words' })
    await ctx.require('sessionProjectionCache').writeCheckpoint(session)
    expect(statSync(`${dir}/.dsh`).mode & 0o777).toBe(0o700)
    for (const suffix of ['', '-wal', '-shm']) expect(statSync(projectionCachePath(dir) + suffix).mode & 0o777).toBe(0o600)
    await ctx.dispose()
    expect(ctx.get('sessionProjectionCache')).toBeUndefined()
  })
})

/** A registry with the test units, outside any context (a second reader of the same file). */
function ctxlessProjections() {
  const registry = createProjectionRegistry(new Context())
  registry.register(messagesUnit)
  registry.register(turnsUnit)
  return registry
}
