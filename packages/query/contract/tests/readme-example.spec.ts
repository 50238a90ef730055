import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { expect, it } from 'vitest'
import { sessionQueryPlugin } from '../src/index.js'

it('runs the README example', async () => {
  const ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))
  await ctx.activate(sessionQueryPlugin())
  const sessions = ctx.require('sessions')
  const query = ctx.require('sessionQuery')

  const parent = sessions.create({ id: 'parent', cwd: '/work' })
  parent.append('user/message', { text: 'split the work' })
  const child = sessions.create({ id: 'child-1', parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
  child.append('user/message', { text: 'part one' })
  await sessions.dispose('child-1')

  const children = await query.listSessions({ parentSession: 'parent', origin: 'subagent' })
  expect(children.records.map((r) => [r.header.id, r.live, r.persisted])).toEqual([['child-1', false, true]])
  const observed = await query.observeSession('child-1')
  expect(observed.events.length).toBe(1)
  const page = await query.readHistory('parent', { limit: 50 })
  expect([page.total, page.nextBefore]).toEqual([1, undefined])
  await ctx.dispose()
})
