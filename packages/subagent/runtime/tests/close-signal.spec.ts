import type { StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { codeOf, gate, type Host, holdScript, hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

const lifecycle = (events: readonly StoredSessionEvent[]) =>
  events.filter((e) => e.type.startsWith('subagent/')).map((e) => [e.type, (e.data as { reason?: string }).reason])

/** A host whose child labelled `busy` holds its turn until `release`; children stay live when idle (no persistence). */
async function held(): Promise<{ h: Host; release: () => void }> {
  const hold = gate()
  const h = await hosts.open({
    persistence: false,
    driver: createScriptedDriver((run) => (run.identity?.label === 'busy' ? holdScript(hold.promise) : [{ kind: 'message', text: 'ok' }])),
  })
  return { h, release: hold.open }
}

describe('close and its signal', () => {
  it('aborted before the call: CANCELLED, and a busy child runs on with its queued input and no close in its log', async () => {
    const { h, release } = await held()
    const parent = h.sessions.create()
    const busy = h.runtime.spawn(parent, { mode: 'continuable', label: 'busy', context: 'fresh', prompt: 'go' })
    await h.runtime.send(busy.id, { caller: parent, text: 'next' })
    expect(await codeOf(h.runtime.close(busy.id, { caller: parent }, AbortSignal.abort()))).toBe('CANCELLED')
    expect(h.runtime.isRunning(busy.id)).toBe(true)
    expect(h.runtime.queuedCount(busy.id)).toBe(1)
    expect(lifecycle(busy.session.events)).toEqual([
      ['subagent/descriptor', undefined],
      ['subagent/start', undefined],
      ['subagent/queued', undefined],
    ])
    // Nothing of the cancelled call remains: the queued input still runs, and a later close is not refused as a second one.
    release()
    const [settled] = await h.runtime.wait([busy.id], { caller: parent })
    expect(settled).toMatchObject({ state: 'settled', reason: 'completed' })
    expect(await h.runtime.close(busy.id, { caller: parent })).toEqual({ id: busy.id, interrupted: false, dropped: 0 })
  })

  it('aborted before the call: CANCELLED, and an idle child stays open, without a final end, and still takes input', async () => {
    const { h } = await held()
    const parent = h.sessions.create()
    const idle = h.runtime.spawn(parent, { mode: 'continuable', label: 'idle', context: 'fresh', prompt: 'go' })
    await idle.done
    const before = idle.session.events.length
    expect(await codeOf(h.runtime.close(idle.id, { caller: parent }, AbortSignal.abort()))).toBe('CANCELLED')
    expect(idle.session.events.length).toBe(before)
    const sent = await h.runtime.send(idle.id, { caller: parent, text: 'again' })
    if (sent.status !== 'started') throw new Error(`expected the idle child to start, got ${sent.status}`)
    expect((await sent.handle.done).end).toBe('completed')
  })

  it('goes ahead once under way: an abort after the call stops a live child and closes it all the same', async () => {
    // The close_agent tool relies on it: it stops waiting for a running turn by racing its own signal.
    const { h } = await held()
    const parent = h.sessions.create()
    const busy = h.runtime.spawn(parent, { mode: 'continuable', label: 'busy', context: 'fresh', prompt: 'go' })
    await h.runtime.send(busy.id, { caller: parent, text: 'next' })
    const controller = new AbortController()
    const closing = h.runtime.close(busy.id, { caller: parent }, controller.signal)
    controller.abort()
    expect(await closing).toEqual({ id: busy.id, interrupted: true, dropped: 1 })
    expect(await h.runtime.wait([busy.id], { caller: parent })).toEqual([{ id: busy.id, state: 'closed' }])
  })
})
