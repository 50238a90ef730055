import { Context } from '@dsh/context'
import { SessionLogOffset, SessionStore } from '@dsh/session'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createSessionQuery, sessionQueryPlugin } from '../src/index.js'

function liveOnly(): { sessions: SessionStore; query: ReturnType<typeof createSessionQuery> } {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  const sessions = new SessionStore(ctx)
  return { sessions, query: createSessionQuery({ sessions }) }
}

describe('createSessionQuery without persistence (a live-only deployment)', () => {
  it('lists and observes live sessions only', async () => {
    const { sessions, query } = liveOnly()
    const parent = sessions.create({ id: 'parent', createdAt: 10 })
    parent.append('user/message', { text: 'spawn two' })
    sessions.create({ id: 'child-b', createdAt: 20, parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
    sessions.create({ id: 'child-a', createdAt: 20, parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
    const children = await query.listSessions({ parentSession: 'parent', origin: 'subagent' })
    expect(children.records.map((r) => r.header.id)).toEqual(['child-a', 'child-b'])
    expect(children.records.every((r) => r.live && !r.persisted && r.revision === undefined)).toBe(true)
    const observed = await query.observeSession('parent')
    expect(observed.events).toBe(parent.events)
    await expect(query.observeSession('child-c')).rejects.toMatchObject({ code: 'SESSION_QUERY_NOT_FOUND' })
  })

  it('drops sessions from the corpus once they are disposed', async () => {
    const { sessions, query } = liveOnly()
    sessions.create({ id: 'short-lived' })
    expect((await query.listSessions()).records).toHaveLength(1)
    await sessions.dispose('short-lived')
    expect((await query.listSessions()).records).toHaveLength(0)
  })
})

describe('sessionQueryPlugin', () => {
  it('fails at activation, naming the missing service, when persistence is not provided', async () => {
    const ctx = new Context()
    ctx.provide('sessions', new SessionStore(ctx))
    await expect(ctx.activate(sessionQueryPlugin())).rejects.toMatchObject({
      code: 'CONTEXT_SERVICE_UNAVAILABLE',
      details: { service: 'sessionPersistence' },
    })
    expect(ctx.get('sessionQuery')).toBeUndefined()
  })

  it('provides sessionQuery over the sessions store and sessionPersistence', async () => {
    const ctx = new Context()
    const sessions = new SessionStore(ctx)
    const persistence = createMemoryPersistence()
    ctx.provide('sessions', sessions)
    ctx.provide('sessionPersistence', persistence)
    await ctx.activate(sessionQueryPlugin())
    const cold = sessions.create({ id: 'cold', createdAt: 1 })
    await persistence.append({ header: cold.header, inheritedEventCount: SessionLogOffset(0) }, [])
    await sessions.dispose('cold')
    sessions.create({ id: 'hot', createdAt: 2 })
    const page = await ctx.require('sessionQuery').listSessions()
    expect(page.records.map((r) => [r.header.id, r.live, r.persisted])).toEqual([
      ['cold', false, true],
      ['hot', true, false],
    ])
    await ctx.dispose()
  })
})
