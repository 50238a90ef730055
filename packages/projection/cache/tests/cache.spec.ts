import { existsSync, statSync } from 'node:fs'
import { Context } from '@dsh/context'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { projectionCachePath, sessionProjectionCachePlugin } from '../src/index.js'
import { host, turn } from './helpers.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup(options: Omit<Parameters<typeof host>[0], 'path'> = {}) {
  const { dir, cleanup } = tempDir('dsh-cache-')
  const path = projectionCachePath(dir)
  const h = await host({ path, throttle: { events: Infinity, ms: Infinity }, ...options })
  cleanups.push(cleanup, () => h.ctx.dispose())
  return { ...h, dir, path }
}

// The rules every cache backend shares (hits, misses, write moments, fail-soft
// writes, ...) are the behaviour suite of `/testing`, run in behaviour.spec.ts;
// these are the SQLite cache's own: its payload format, its file, its plugin.

describe('cachedSnapshot', () => {
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

  it('refuses options without a location', async () => {
    // (A bad throttle is refused by the behaviour suite every cache backend runs: behaviour.spec.ts.)
    const ctx = new Context()
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await expect(ctx.activate(sessionProjectionCachePlugin({}))).rejects.toMatchObject({ code: 'SESSION_PROJECTION_CACHE_INVALID_OPTIONS' })
    expect(ctx.get('sessionProjectionCache')).toBeUndefined()
  })

  it('keeps its database under the session root', async () => {
    const { dir, cleanup } = tempDir('dsh-cache-')
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
