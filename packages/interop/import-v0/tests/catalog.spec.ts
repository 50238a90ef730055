import { rmSync } from 'node:fs'
import { Context } from '@dsh/context'
import { SessionId, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { createScriptedDriver, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import { importV0 } from '../src/index.js'
import {
  CORRUPT_DESCRIPTOR,
  FORKED_CONTINUABLE,
  FORKED_ONE_SHOT,
  FRESH_CONTINUABLE,
  healthyFixtures,
  NO_DESCRIPTOR,
  PARENT,
  tempDir,
  writeRoot,
} from './fixtures.js'

const dirs: string[] = []
const contexts: Context[] = []
afterEach(async () => {
  for (const ctx of contexts.splice(0)) await ctx.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A cold process over the imported sessions: store, projections, persistence, query and the subagent runtime. */
async function host(persistence: SessionPersistence) {
  const ctx = new Context()
  contexts.push(ctx)
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionPersistencePlugin(persistence))
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence }))
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver() }))
  return ctx
}

const BACKENDS = {
  jsonl: (): SessionPersistence => {
    const root = tempDir('dsh')
    dirs.push(root)
    return createJsonlPersistence({ root })
  },
  memory: (): SessionPersistence => createMemoryPersistence(),
}

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('the imported subagent tree (%s persistence)', (name) => {
  it('lists the children the harness would list: same ids, labels and modes, corrupt where its parser rejects the descriptor', async () => {
    const from = await writeRoot(healthyFixtures())
    dirs.push(from)
    const persistence = BACKENDS[name]()
    expect((await importV0({ from, persistence })).failed).toBe(0)
    const ctx = await host(persistence)
    const rows = await ctx.require('subagents').listChildren(PARENT)
    const byId = [...rows].sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(byId).toEqual([
      { kind: 'diagnostic', id: CORRUPT_DESCRIPTOR, reason: 'corrupt' },
      { kind: 'child', id: FORKED_CONTINUABLE, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'reviewer' },
      { kind: 'child', id: FORKED_ONE_SHOT, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'summarize' },
      { kind: 'child', id: FRESH_CONTINUABLE, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'researcher' },
      { kind: 'diagnostic', id: NO_DESCRIPTOR, reason: 'corrupt' },
    ])
    // Every imported event is readable through the query layer (what `dsh show` pages through).
    const observed = await ctx.require('sessionQuery').observeSession(SessionId(FORKED_ONE_SHOT))
    expect(observed.events.length).toBe((await persistence.inspect(SessionId(FORKED_ONE_SHOT))).events.length)
    expect(observed.inheritedEventCount).toBeGreaterThan(0)
  })
})
