/**
 * `@dsh/session-projection-cache/testing`: the behaviour suite every
 * checkpoint cache backend runs (the SQLite cache here, the PostgreSQL cache
 * in `@dsh/session-projection-cache-postgres`). `vitest` is an optional peer:
 * only this subpath loads it.
 *
 * The suite builds each host itself (store, projections with its own test
 * units, then the backend's plugin through `target.activate`) and asserts only
 * through the `sessionProjectionCache` contract, plus `rowCount` when the
 * backend can count its stored rows.
 */
import { Context, type Logger } from '@dsh/context'
import { type Session, type SessionHeader, SessionLogOffset, sessionStorePlugin } from '@dsh/session'
import { type ProjectionKey, type SessionProjectionUnit, sessionProjectionsPlugin, z } from '@dsh/session-projection'
import { afterEach, describe, expect, it } from 'vitest'
import type { CheckpointThrottle } from './scheduler.js'
import type { SessionProjectionCache } from './types.js'

/** A backend under test. `P` is its storage place (a file path, a pool). */
export interface CheckpointCacheTarget<P> {
  /** Fresh storage for one test; `close` runs after every host of the test was disposed. */
  place(): Promise<{ readonly place: P; close(): unknown }>
  /** Activates the backend's cache plugin on `place` (the store and the projection registry are active already). */
  activate(ctx: Context, place: P, throttle: CheckpointThrottle): Promise<void>
  /** The code the backend's plugin refuses a bad throttle with. */
  readonly invalidOptionsCode: string
  /** The number of checkpoint rows stored on `place` (optional: lets the suite check what was stored, not only what is served). */
  rowCount?(place: P): Promise<number>
}

// The suite's own units. Their keys are not declared in `SessionProjectionStateMap`
// (a test module must not widen its importers' types), hence the casts.
interface Messages {
  n: number
  last: string | null
}
const MESSAGES = 'suite/messages' as ProjectionKey
const TURNS = 'suite/turns' as ProjectionKey
const BRITTLE = 'suite/brittle' as ProjectionKey
const KEYS = [MESSAGES, TURNS]

const messagesUnit = unit<Messages>({
  key: MESSAGES,
  stateVersion: 1,
  init: () => ({ n: 0, last: null }),
  apply: (state, event) => (event.type === 'user/message' ? { n: state.n + 1, last: (event.data as { text: string }).text } : state),
  view: (state) => state,
  schema: z.object({ n: z.number().int().nonnegative(), last: z.string().nullable() }),
})
const turnsUnit = unit<{ ended: number }>({
  key: TURNS,
  stateVersion: 2,
  init: () => ({ ended: 0 }),
  apply: (state, event) => (event.type === 'turn/end' ? { ended: state.ended + 1 } : state),
  view: (state) => state.ended,
  schema: z.object({ ended: z.number().int().nonnegative() }),
})
/** Throws on `tool/call`. */
const brittleUnit = unit<{ n: number }>({
  key: BRITTLE,
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state, event) => {
    if (event.type === 'tool/call') throw new Error('brittle: no tool calls')
    return { n: state.n + 1 }
  },
  view: (state) => state.n,
  schema: z.object({ n: z.number() }),
})

function unit<S>(definition: {
  key: ProjectionKey
  stateVersion: number
  init(): S
  apply(state: S, event: Session['events'][number]): S
  view(state: S): unknown
  schema: z.ZodType<S>
}): SessionProjectionUnit {
  return definition as unknown as SessionProjectionUnit
}

/** The suite's projection units, for a backend's own tests: keys `testKeys.*`, not declared in `SessionProjectionStateMap`. */
export const testUnits = { messages: messagesUnit, turns: turnsUnit, brittle: brittleUnit } as const
export const testKeys = { messages: MESSAGES, turns: TURNS, brittle: BRITTLE } as const

export interface CacheTestHostOptions {
  /** Activates the cache plugin under test (after the store, `before` and the projection registry). */
  activate(ctx: Context, throttle: CheckpointThrottle | undefined): Promise<void>
  readonly throttle?: CheckpointThrottle
  /** Registered units; default `testUnits.messages` and `testUnits.turns`. */
  readonly units?: readonly SessionProjectionUnit[]
  /** Installed before the cache plugin: stands where persistence's flush listener sits. */
  readonly onFlush?: (session: Session) => unknown
  /** Runs after the store is active, before the projection registry (e.g. to activate persistence). */
  before?(ctx: Context): Promise<void>
  readonly idPrefix?: string
}

/**
 * A host for a cache backend's tests: a context with a recording logger
 * (`warnings`), the session store (deterministic ids `<idPrefix>1, 2, …` and
 * clock), the projection registry with `units`, then the cache plugin.
 * The caller disposes `ctx`.
 */
export async function cacheTestHost(options: CacheTestHostOptions) {
  const warnings: Array<{ message: string; error: unknown }> = []
  const logger: Logger = {
    warn: (message, error) => void warnings.push({ message, error }),
    error: (message, error) => void warnings.push({ message, error }),
  }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let n = 0
  await ctx.activate(sessionStorePlugin({ clock: () => 1_700_000_000_000 + n, newId: () => `${options.idPrefix ?? 's'}${++n}` }))
  if (options.onFlush) ctx.on('session/flush', options.onFlush)
  await options.before?.(ctx)
  await ctx.activate(sessionProjectionsPlugin())
  const projections = ctx.require('sessionProjections')
  for (const u of options.units ?? [messagesUnit, turnsUnit]) projections.register(u)
  await options.activate(ctx, options.throttle)
  const cache: SessionProjectionCache = ctx.require('sessionProjectionCache')
  return { ctx, sessions: ctx.require('sessions'), projections, cache, warnings }
}

/** Appends one completed turn: start, a user message `text`, the reply `re: <text>`, end (4 events). */
export function appendTurn(session: Session, no: number, text: string): void {
  session.append('turn/start', { turn: no })
  session.append('user/message', { text })
  session.append('assistant/message', { turn: no, text: `re: ${text}` })
  session.append('turn/end', { turn: no, reason: 'completed' })
}

/** Runs the checkpoint cache behaviour suite against `target`. */
export function checkpointCacheSuite<P>(name: string, target: CheckpointCacheTarget<P>): void {
  const cleanups: Array<() => unknown> = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  async function freshPlace(): Promise<P> {
    const { place, close } = await target.place()
    cleanups.push(close)
    return place
  }

  async function host(place: P, options: Omit<CacheTestHostOptions, 'activate' | 'before'> = {}) {
    const h = await cacheTestHost({
      ...options,
      activate: (ctx, throttle) => target.activate(ctx, place, throttle ?? { events: Infinity, ms: Infinity }),
    })
    cleanups.push(() => h.ctx.dispose())
    return h
  }

  async function setup(options: Omit<CacheTestHostOptions, 'activate' | 'before'> = {}) {
    const place = await freshPlace()
    return { place, ...(await host(place, options)) }
  }

  const lookup = (cache: SessionProjectionCache, header: SessionHeader, cut: number, keys: readonly ProjectionKey[]) =>
    cache.cachedSnapshot(header, SessionLogOffset(cut), keys)

  describe(`${name}: checkpoint cache behaviour`, () => {
    it('hits after the mandatory turn/end write with exactly the live values', async () => {
      const { sessions, projections, cache } = await setup()
      const session = sessions.create()
      expect(lookup(cache, session.header, 0, KEYS)).toBeUndefined()
      appendTurn(session, 1, 'hello')
      await cache.idle()
      expect(cache.metrics.writes).toBe(1)
      expect(lookup(cache, session.header, 0, KEYS)).toEqual(projections.snapshot(session))
      expect(lookup(cache, session.header, 0, [TURNS])).toEqual({ [TURNS]: 1 })
      expect(cache.metrics).toMatchObject({ hits: 2, misses: 1 })
    })

    it('misses on another lifecycle of the same id, another cut, another stateVersion and an unregistered key', async () => {
      const { sessions, cache, place, ctx } = await setup()
      const session = sessions.create({ id: 'same' })
      appendTurn(session, 1, 'first life')
      await cache.idle()
      const { header } = session
      expect(lookup(cache, header, 0, KEYS)).toBeDefined()
      expect(lookup(cache, { ...header, createdAt: header.createdAt + 1 }, 0, KEYS)).toBeUndefined()
      expect(lookup(cache, header, 1, KEYS)).toBeUndefined()
      expect(lookup(cache, { ...header, id: 'other' as never }, 0, KEYS)).toBeUndefined()
      expect(lookup(cache, header, 0, [BRITTLE])).toBeUndefined()
      await ctx.dispose()
      // Another host where `turns` is at another stateVersion: its rows are ignored.
      const next = await host(place, { units: [messagesUnit, { ...turnsUnit, stateVersion: 3 }] })
      expect(lookup(next.cache, header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 1, last: 'first life' } })
      expect(lookup(next.cache, header, 0, [TURNS])).toBeUndefined()
      expect(lookup(next.cache, header, 0, KEYS)).toBeUndefined()
    })

    it('keeps one checkpoint per session: a new lifecycle of the id replaces the old rows', async () => {
      const { sessions, cache, place } = await setup()
      const first = sessions.create({ id: 'x', createdAt: 1 })
      appendTurn(first, 1, 'old')
      appendTurn(first, 2, 'older')
      await sessions.dispose('x')
      const second = sessions.create({ id: 'x', createdAt: 2 })
      appendTurn(second, 1, 'new')
      await cache.idle()
      expect(lookup(cache, first.header, 0, KEYS)).toBeUndefined()
      expect(lookup(cache, second.header, 0, KEYS)).toEqual({ [MESSAGES]: { n: 1, last: 'new' }, [TURNS]: 1 })
      if (target.rowCount) expect(await target.rowCount(place)).toBe(2)
    })

    it('serves a seeded child by its exact cut', async () => {
      const { sessions, projections, cache } = await setup()
      const parent = sessions.create()
      appendTurn(parent, 1, 'p')
      const child = sessions.fork(parent)
      appendTurn(child, 2, 'c')
      await cache.idle()
      expect(lookup(cache, child.header, 4, KEYS)).toEqual(projections.snapshot(child))
      expect(lookup(cache, child.header, 0, KEYS)).toBeUndefined()
    })

    it('reproduces a failed unit as an absent key, like the live snapshot', async () => {
      const { sessions, projections, cache } = await setup({ units: [messagesUnit, turnsUnit, brittleUnit] })
      const session = sessions.create()
      session.append('turn/start', { turn: 1 })
      session.append('tool/call', { turn: 1, callId: 'c', name: 'n', arguments: null })
      session.append('turn/end', { turn: 1, reason: 'completed' })
      await cache.idle()
      const live = projections.snapshot(session)
      expect(live).toEqual({ [MESSAGES]: { n: 0, last: null }, [TURNS]: 1 })
      expect(lookup(cache, session.header, 0, [MESSAGES, TURNS, BRITTLE])).toEqual(live)
    })

    it('fails softly when the flush fails: no row, a warning, failedWrites counted', async () => {
      const { sessions, cache, warnings, place } = await setup({
        onFlush: () => {
          throw new Error('disk full')
        },
      })
      const session = sessions.create()
      appendTurn(session, 1, 'a')
      await cache.idle()
      expect(cache.metrics).toMatchObject({ writes: 0, failedWrites: 1 })
      expect(lookup(cache, session.header, 0, KEYS)).toBeUndefined()
      expect(warnings.some((w) => /checkpoint of session 's1' failed/.test(w.message))).toBe(true)
      if (target.rowCount) expect(await target.rowCount(place)).toBe(0)
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
      expect(lookup(byCount.cache, a.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 10, last: 'm9' } })
      // A threshold reached while a write is in flight is not lost: one
      // follow-up write, when the first settles, covers every event so far.
      await append(12, 22)
      expect(byCount.cache.metrics.writes).toBe(4)
      expect(lookup(byCount.cache, a.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 22, last: 'm21' } })

      const byTime = await setup({ throttle: { events: Infinity, ms: 20 } })
      const b = byTime.sessions.create()
      b.append('user/message', { text: 'x' })
      b.append('user/message', { text: 'y' })
      expect(byTime.cache.metrics.writes).toBe(0)
      // Waits for the timer however long it takes: a count, not a speed, is asserted.
      while (byTime.cache.metrics.writes === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      await byTime.cache.idle()
      expect(byTime.cache.metrics.writes).toBe(1)
      expect(lookup(byTime.cache, b.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 2, last: 'y' } })
    })

    it('writes the final cells when a session goes cold, and the disposer writes live sessions with unwritten events', async () => {
      const { sessions, cache, ctx, place } = await setup()
      const cold = sessions.create()
      const live = sessions.create()
      appendTurn(cold, 1, 'a')
      cold.append('user/message', { text: 'after the turn' })
      live.append('user/message', { text: 'never a turn/end' })
      await cache.idle()
      expect(lookup(cache, cold.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 1, last: 'a' } })
      await sessions.dispose(cold.id)
      await cache.idle()
      expect(lookup(cache, cold.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 2, last: 'after the turn' } })
      expect(lookup(cache, live.header, 0, [MESSAGES])).toBeUndefined()
      await ctx.dispose()
      // A second reader of the same storage sees what the disposer wrote.
      const reopened = await host(place)
      expect(lookup(reopened.cache, live.header, 0, [MESSAGES])).toEqual({ [MESSAGES]: { n: 1, last: 'never a turn/end' } })
    })

    it('the last write wins, even over a lifecycle with an identical header and a longer log', async () => {
      const { sessions, cache } = await setup()
      const first = sessions.create({ id: 'twin', createdAt: 5 })
      appendTurn(first, 1, 'a')
      appendTurn(first, 2, 'b')
      await sessions.dispose('twin')
      const second = sessions.create({ id: 'twin', createdAt: 5 })
      expect(second.header).toEqual(first.header)
      appendTurn(second, 1, 'only turn')
      await cache.idle()
      expect(lookup(cache, second.header, 0, KEYS)).toEqual({ [MESSAGES]: { n: 1, last: 'only turn' }, [TURNS]: 1 })
    })

    it('a closed cache misses and refuses writes without throwing', async () => {
      const { sessions, cache } = await setup()
      const session = sessions.create()
      cache.close()
      appendTurn(session, 1, 'a')
      expect(await cache.writeCheckpoint(session)).toBe(false)
      expect(lookup(cache, session.header, 0, KEYS)).toBeUndefined()
    })

    it('refuses a throttle that is not a number >= 1 with a typed error, providing nothing', async () => {
      const place = await freshPlace()
      const ctx = new Context()
      cleanups.push(() => ctx.dispose())
      await ctx.activate(sessionStorePlugin())
      await ctx.activate(sessionProjectionsPlugin())
      for (const throttle of [{ events: 0 }, { ms: Number.NaN }, { events: -3 }]) {
        await expect(target.activate(ctx, place, throttle)).rejects.toMatchObject({ code: target.invalidOptionsCode })
      }
      expect(ctx.get('sessionProjectionCache')).toBeUndefined()
    })
  })
}
