import { isDshError } from '@dsh/context'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentDriver, SubagentRuntime } from '../src/index.js'
import { completedTurn, createHost, gate, holdScript, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

async function expectCode(promise: Promise<unknown> | (() => unknown), code: string): Promise<void> {
  try {
    await (typeof promise === 'function' ? promise() : promise)
  } catch (error) {
    expect(isDshError(error) ? error.code : error).toBe(code)
    return
  }
  expect.fail(`expected ${code}, but it succeeded`)
}

describe('spawn', () => {
  it('creates a fresh child (origin, parent, depth + 1), appends the descriptor first, runs the script and goes cold', async () => {
    const h = await host()
    const parent = h.sessions.create({ cwd: '/work' })
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', label: 'scan', context: 'fresh', prompt: 'look around' })
    expect(h.sessions.get(handle.id)).toBe(handle.session)
    expect(handle.session.header).toMatchObject({
      origin: 'subagent',
      parentSession: parent.id,
      delegationDepth: 1,
      isSeeded: false,
      cwd: '/work',
    })
    expect(handle.session.events[0]).toMatchObject({
      type: 'subagent/descriptor',
      seq: 0,
      data: { version: 2, mode: 'one-shot', provider: 'scripted', label: 'scan' },
    })
    const outcome = await handle.done
    expect(outcome).toEqual({ reason: 'completed', text: 'Done: look around', end: 'completed' })
    expect(handle.session.events.map((e) => e.type)).toEqual([
      'subagent/descriptor',
      'subagent/start',
      'user/message',
      'turn/start',
      'assistant/chunk',
      'assistant/message',
      'turn/end',
      'subagent/end',
    ])
    expect(handle.session.events[1]!.data).toEqual({ kind: 'spawn', turn: 1 })
    expect(handle.session.events.at(-1)!.data).toEqual({ turn: 1, reason: 'completed', text: 'Done: look around' })
    // The parent heard of it.
    expect(parent.events.at(-1)).toMatchObject({
      type: 'subagent/notice',
      data: { kind: 'settled', child: handle.id, mode: 'one-shot', label: 'scan', reason: 'completed', text: 'Done: look around' },
    })
    // With persistence present the child goes cold once its run settles.
    expect(h.sessions.get(handle.id)).toBeUndefined()
    const stored = await h.persistence!.inspect(handle.id)
    expect(stored.events).toHaveLength(8)
    expect(stored.header.origin).toBe('subagent')
  })

  it('seeds a fork child with the parent log up to the latest cut outside an open turn', async () => {
    const h = await host()
    const parent = h.sessions.create()
    completedTurn(parent, 1)
    parent.append('turn/start', { turn: 2 }) // the parent is mid-turn (it is calling the spawn tool)
    parent.append('tool/call', { turn: 2, callId: 'c', name: 'spawn', arguments: {} })
    const handle = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fork', settings: { maxTurns: 2 } })
    expect(handle.session.header.isSeeded).toBe(true)
    expect(handle.session.inheritedEventCount).toBe(3)
    // The descriptor is the harness's shape; the setting it has no room for follows in subagent/options.
    expect(handle.session.eventAt(3)).toMatchObject({
      type: 'subagent/descriptor',
      data: { version: 2, mode: 'continuable', provider: 'scripted', label: 'helper' },
    })
    expect(handle.session.eventAt(3)!.data).not.toHaveProperty('maxTurns')
    expect(handle.session.eventAt(4)).toMatchObject({ type: 'subagent/options', data: { version: 1, maxTurns: 2 } })
    await handle.done
    const stored = await h.persistence!.inspect(handle.id)
    expect(stored.inheritedEventCount).toBe(3)
    // Its own turn is numbered above every inherited one.
    expect(stored.events.find((e) => e.type === 'turn/start' && e.seq >= 3)?.data).toEqual({ turn: 2 })
  })

  it('honours an explicit fork boundary and child id', async () => {
    const h = await host()
    const parent = h.sessions.create()
    completedTurn(parent, 1)
    completedTurn(parent, 2)
    const handle = h.runtime.spawn(parent.id, { mode: 'one-shot', context: 'fork', boundary: 3, id: 'kid' })
    expect(handle.id).toBe('kid')
    expect(handle.session.inheritedEventCount).toBe(3)
    await handle.done
  })

  it('bounds delegation depth (default 3, configurable) and leaves no child behind', async () => {
    const h = await host({ maxDepth: 1 })
    const top = h.sessions.create()
    const child = h.runtime.spawn(top, { mode: 'one-shot', context: 'fresh' })
    await child.done
    const restored = h.sessions.restore(await h.persistence!.load(child.id))
    const before = h.sessions.list().length
    await expectCode(() => h.runtime.spawn(restored, { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_DEPTH_EXCEEDED')
    expect(h.sessions.list()).toHaveLength(before)
    expect((await host()).runtime.maxDepth).toBe(3)
    expect(() => new SubagentRuntime(h.ctx, { driver: createScriptedDriver(), maxDepth: -1 })).toThrow(
      expect.objectContaining({ code: 'SUBAGENT_INVALID_OPTIONS' }),
    )
  })

  it('rejects an invalid descriptor (continuable without a label, empty tool filter, unreadable outputSchema) before creating anything', async () => {
    const h = await host()
    const parent = h.sessions.create()
    await expectCode(() => h.runtime.spawn(parent, { mode: 'continuable', context: 'fresh' }), 'SUBAGENT_INVALID_DESCRIPTOR')
    await expectCode(
      () => h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: { toolFilter: {} } }),
      'SUBAGENT_INVALID_DESCRIPTOR',
    )
    await expectCode(
      () => h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', settings: { outputSchema: { type: 'bogus' } } }),
      'SUBAGENT_INVALID_DESCRIPTOR',
    )
    await expectCode(() => h.runtime.spawn(parent, { mode: 'one-shot', label: '', context: 'fresh' }), 'SUBAGENT_INVALID_DESCRIPTOR')
    await expectCode(() => h.runtime.spawn(parent, { mode: 'one-shot', context: 'sideways' as 'fresh' }), 'SUBAGENT_INVALID_ARGUMENT')
    expect(h.sessions.list()).toEqual([parent])
  })

  it('needs a live parent', async () => {
    const h = await host()
    await expectCode(() => h.runtime.spawn('nobody', { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_PARENT_NOT_LIVE')
    const parent = h.sessions.create()
    await h.sessions.dispose(parent.id)
    await expectCode(() => h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_PARENT_NOT_LIVE')
  })

  it('keeps the child live after its run when there is no persistence to go cold to', async () => {
    const h = await host({ persistence: false })
    const parent = h.sessions.create()
    const handle = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await handle.done
    expect(h.sessions.get(handle.id)).toBe(handle.session)
    expect(h.runtime.isRunning(handle.id)).toBe(false)
  })

  it('closes a turn the driver left open when it throws', async () => {
    const throwing: SubagentDriver = {
      name: 'throwing',
      async run(run) {
        run.session.append('turn/start', { turn: run.turn })
        throw new Error('model exploded')
      },
    }
    const h = await host({ driver: throwing })
    const handle = h.runtime.spawn(h.sessions.create(), { mode: 'one-shot', context: 'fresh' })
    const outcome = await handle.done
    expect(outcome.reason).toBe('error')
    const stored = await h.persistence!.inspect(handle.id)
    expect(stored.events.at(-2)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'error' } })
    expect(stored.events.at(-1)).toMatchObject({ type: 'subagent/end', data: { turn: 1, reason: 'error', error: 'model exploded' } })
  })

  it('ends the turn with reason error on a scripted failure', async () => {
    const h = await host({
      driver: createScriptedDriver([
        { kind: 'chunk', text: 'a' },
        { kind: 'fail', message: 'no' },
      ]),
    })
    const handle = h.runtime.spawn(h.sessions.create(), { mode: 'one-shot', context: 'fresh' })
    expect((await handle.done).reason).toBe('error')
    expect((await h.persistence!.inspect(handle.id)).events.at(-2)).toMatchObject({ type: 'turn/end', data: { reason: 'error' } })
  })
})

describe('interrupt', () => {
  it('cancels a running turn (turn/end reason cancelled) and reports whether anything ran', async () => {
    const hold = gate()
    const h = await host({ driver: createScriptedDriver(holdScript(hold.promise)) })
    const handle = h.runtime.spawn(h.sessions.create(), { mode: 'one-shot', context: 'fresh' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(h.runtime.isRunning(handle.id)).toBe(true)
    expect(await h.runtime.interrupt(handle.id)).toBe(true)
    expect((await handle.done).reason).toBe('cancelled')
    expect((await h.persistence!.inspect(handle.id)).events.slice(-2)).toMatchObject([
      { type: 'turn/end', data: { reason: 'cancelled' } },
      { type: 'subagent/end', data: { reason: 'cancelled' } },
    ])
    expect(await h.runtime.interrupt(handle.id)).toBe(false)
    expect(await h.runtime.interrupt('never-existed')).toBe(false)
  })

  it('runtime disposal interrupts every run and lets the children settle durably', async () => {
    const storage = new MemoryPersistenceStorage()
    const hold = gate()
    const h = await createHost({ storage, driver: createScriptedDriver(holdScript(hold.promise)) })
    const handle = h.runtime.spawn(h.sessions.create(), { mode: 'one-shot', context: 'fresh' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    await h.dispose()
    expect((await handle.done).reason).toBe('cancelled')
    const reopened = await host({ storage })
    expect((await reopened.persistence!.inspect(handle.id)).events.slice(-2)).toMatchObject([
      { type: 'turn/end', data: { reason: 'cancelled' } },
      { type: 'subagent/end', data: { reason: 'cancelled' } },
    ])
  })
})

describe('resume', () => {
  it('runs the next turn of a cold continuable child for its live parent', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const first = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'one' })
    await first.done
    expect(h.sessions.get(first.id)).toBeUndefined()
    const again = await h.runtime.resume(first.id, { caller: parent, prompt: 'two' })
    expect(again.id).toBe(first.id)
    expect(await again.done).toEqual({ reason: 'completed', text: 'Done: two', end: 'completed' })
    const stored = await h.persistence!.inspect(first.id)
    const turns = stored.events.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)
    expect(turns).toEqual([1, 2])
    expect(stored.events.filter((e) => e.type === 'subagent/descriptor')).toHaveLength(1)
  })

  it('resumes a live idle continuable child in place', async () => {
    const h = await host({ persistence: false })
    const parent = h.sessions.create()
    const first = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await first.done
    const again = await h.runtime.resume(first.id, { caller: parent.id, prompt: 'more' })
    expect(again.session).toBe(first.session)
    await again.done
    expect(first.session.events.filter((e) => e.type === 'turn/end')).toHaveLength(2)
  })

  it('refuses callers other than the live parent', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const stranger = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await child.done
    await expectCode(h.runtime.resume(child.id, { caller: stranger }), 'SUBAGENT_UNAUTHORIZED')
    await expectCode(h.runtime.resume(child.id, { caller: 'not-live' }), 'SUBAGENT_UNAUTHORIZED')
    await h.sessions.dispose(parent.id)
    await expectCode(h.runtime.resume(child.id, { caller: parent.id }), 'SUBAGENT_UNAUTHORIZED')
    // A top-level session is nobody's subagent.
    const top = h.sessions.create()
    await expectCode(h.runtime.resume(top.id, { caller: stranger }), 'SUBAGENT_UNAUTHORIZED')
  })

  it('refuses one-shot children and children whose own descriptor is missing or corrupt', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const oneShot = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await oneShot.done
    await expectCode(h.runtime.resume(oneShot.id, { caller: parent }), 'SUBAGENT_NOT_RESUMABLE')

    // A fork of a continuable child inherits its descriptor but has none of its own.
    const continuable = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await continuable.done
    const live = h.sessions.restore(await h.persistence!.load(continuable.id))
    const heir = h.sessions.fork(live, { origin: 'subagent', delegationDepth: 2 })
    completedTurn(heir, 5)
    await h.sessions.dispose(heir.id)
    await h.sessions.dispose(live.id)
    await expectCode(h.runtime.resume(heir.id, { caller: continuable.id }), 'SUBAGENT_UNAUTHORIZED') // caller cold
    const liveParent = h.sessions.restore(await h.persistence!.load(continuable.id))
    await expectCode(h.runtime.resume(heir.id, { caller: liveParent }), 'SUBAGENT_NOT_RESUMABLE')

    const corrupt = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
    corrupt.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'p', label: 'x', unknown: true })
    await expectCode(h.runtime.resume(corrupt.id, { caller: parent }), 'SUBAGENT_NOT_RESUMABLE')
    await h.sessions.dispose(corrupt.id)
    await expectCode(h.runtime.resume(corrupt.id, { caller: parent }), 'SUBAGENT_NOT_RESUMABLE')
  })

  it('refuses a child that is running, and an id that does not exist', async () => {
    const hold = gate()
    const h = await host({ driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await expectCode(h.runtime.resume(child.id, { caller: parent }), 'SUBAGENT_BUSY')
    hold.open()
    await child.done
    await expectCode(h.runtime.resume('ghost', { caller: parent }), 'SUBAGENT_NOT_FOUND')
  })

  it('is cancellable', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await child.done
    await expectCode(h.runtime.resume(child.id, { caller: parent }, AbortSignal.abort()), 'CANCELLED')
    expect(h.sessions.get(child.id)).toBeUndefined()
  })

  it('needs persistence to resume a cold child', async () => {
    const h = await host({ persistence: false })
    const parent = h.sessions.create()
    await expectCode(h.runtime.resume('cold-one', { caller: parent }), 'SUBAGENT_PERSISTENCE_UNAVAILABLE')
  })
})

describe('the subagents plugin', () => {
  it('registers the three units; a runtime built over a bare service source fails per operation with the SUBAGENT_CONTROL_* codes', async () => {
    const h = await host()
    expect(h.projections.keys().sort()).toEqual(['subagent', 'subagentProfile', 'subagentTiming'])
    const nothing = new SubagentRuntime({ get: () => undefined }, { driver: createScriptedDriver() })
    await expectCode(() => nothing.spawn('p', { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE')
    const sessionsOnly = new SubagentRuntime(
      { get: ((name: string) => (name === 'sessions' ? h.sessions : undefined)) as never },
      { driver: createScriptedDriver() },
    )
    await expectCode(sessionsOnly.resume('x', { caller: h.sessions.create() }), 'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE')
  })

  it('a read-only runtime lists but refuses spawn, resume and send with SUBAGENT_READ_ONLY', async () => {
    const h = await host()
    const parent = h.sessions.create()
    await h.runtime.spawn(parent, { id: 'kid', mode: 'continuable', label: 'kid', context: 'fresh', prompt: 'go' }).done
    const readOnly = new SubagentRuntime(h.ctx, { driver: createScriptedDriver(), readOnly: true })
    await readOnly.ready()
    expect((await readOnly.listChildren(parent.id)).map((entry) => entry.id)).toEqual(['kid'])
    const before = h.sessions.list().length
    await expectCode(() => readOnly.spawn(parent, { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_READ_ONLY')
    await expectCode(readOnly.resume('kid', { caller: parent, prompt: 'again' }), 'SUBAGENT_READ_ONLY')
    await expectCode(readOnly.send('kid', { caller: parent, text: 'more' }), 'SUBAGENT_READ_ONLY')
    expect(h.sessions.list()).toHaveLength(before)
  })

  it('refuses work after disposal', async () => {
    const h = await createHost()
    const runtime = h.runtime
    const parent = h.sessions.create()
    await h.dispose()
    await expectCode(() => runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' }), 'SUBAGENT_DISPOSED')
  })
})
