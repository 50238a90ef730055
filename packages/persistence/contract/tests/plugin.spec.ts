import { Context } from '@dsh/context'
import { SessionId, sessionStorePlugin } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  createMemoryPersistence,
  MemoryPersistenceStorage,
  type SessionPersistenceCoordinator,
  type SharedReadsPersistence,
  sessionPersistencePlugin,
} from '../src/index.js'
import { capturingLogger } from './support.js'

async function host(storage: MemoryPersistenceStorage, options: Parameters<typeof sessionPersistencePlugin>[1] = {}) {
  const logger = capturingLogger()
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  const backend = createMemoryPersistence({ storage })
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(backend, options))
  return { ctx, backend, logger }
}

describe('sessionPersistencePlugin', () => {
  it('runs the README example: persist, restart, resume', async () => {
    const storage = new MemoryPersistenceStorage()

    // First process: create a session and append; dispose flushes and closes.
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(createMemoryPersistence({ storage })))
    const sessions = ctx.require('sessions')
    const session = sessions.create({ id: 'demo', cwd: '/work' })
    session.append('turn/start', { turn: 1 })
    session.append('user/message', { text: 'hello' })
    await sessions.flush(session) // durable from here on
    session.append('assistant/chunk', { turn: 1, index: 0, delta: 'hi th' })
    await ctx.dispose() // "crash" in the middle of turn 1, after a final flush

    // Second process over the same storage: list headers, load (repairs the open turn), resume.
    const next = new Context()
    await next.activate(sessionStorePlugin())
    await next.activate(sessionPersistencePlugin(createMemoryPersistence({ storage })))
    const persistence = next.require('sessionPersistence')
    const [record] = await persistence.list()
    expect(record).toMatchObject({ header: { id: 'demo', cwd: '/work' }, inheritedEventCount: 0 })
    const loaded = await persistence.load(SessionId('demo'))
    expect(loaded.repaired).toBe(true)
    const resumed = next.require('sessions').restore(loaded)
    resumed.append('turn/start', { turn: 2 })
    await next.dispose()

    const check = createMemoryPersistence({ storage })
    const observation = await check.inspect(SessionId('demo'))
    expect(observation.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/chunk', 'turn/end', 'turn/start'])
    expect(observation.events[3]!.data).toEqual({ turn: 1, reason: 'interrupted' })
  })

  it('provides the backend behind shared reads, and closes it on dispose', async () => {
    const storage = new MemoryPersistenceStorage()
    const { ctx, backend } = await host(storage)
    const service = ctx.require('sessionPersistence') as SharedReadsPersistence
    expect(service.backend).toBe(backend)
    expect(service.sharedReads).toMatchObject({ joined: 0, lruHits: 0, misses: 0 })
    await ctx.dispose()
    await expect(backend.list()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CLOSED' })
  })

  it('sharedReads: false provides the backend itself', async () => {
    const { ctx, backend } = await host(new MemoryPersistenceStorage(), { sharedReads: false })
    expect(ctx.require('sessionPersistence')).toBe(backend)
    await ctx.dispose()
  })

  it('dispose flushes events still inside the write-behind window', async () => {
    const storage = new MemoryPersistenceStorage()
    let coordinator: SessionPersistenceCoordinator | undefined
    const { ctx } = await host(storage, { writeBehindMs: 60_000, onCoordinator: (c) => (coordinator = c) })
    const session = ctx.require('sessions').create({ id: 'late' })
    for (let i = 0; i < 10; i++) session.append('user/message', { text: `m${i}` })
    expect(coordinator?.status('late')).toMatchObject({ pending: 10, materialized: false })
    await ctx.dispose()
    expect((await createMemoryPersistence({ storage }).inspect(SessionId('late'))).events).toHaveLength(10)
  })

  it('fails at activation when the sessions service is missing', async () => {
    const ctx = new Context()
    await expect(ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))).rejects.toMatchObject({
      code: 'CONTEXT_SERVICE_UNAVAILABLE',
    })
    await ctx.dispose()
  })

  it('reports a final flush that failed and still closes the backend', async () => {
    const storage = new MemoryPersistenceStorage()
    const { ctx, backend, logger } = await host(storage, { writeBehindMs: 60_000 })
    const session = ctx.require('sessions').create({ id: 'doomed' })
    session.append('user/message', { text: 'x' })
    // Another process claims the id with another lifecycle before we flush.
    await createMemoryPersistence({ storage }).append(
      { header: { ...session.header, createdAt: 1 }, inheritedEventCount: session.inheritedEventCount },
      [],
    )
    await ctx.dispose()
    expect(logger.errors.length).toBeGreaterThan(0)
    await expect(backend.stat(SessionId('doomed'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CLOSED' })
  })
})
