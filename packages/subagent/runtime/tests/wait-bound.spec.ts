import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { codeOf, gate, holdScript, hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

function heapAfterGc(): number {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

describe('wait: a bound on what waits leave on a busy child', () => {
  it('keeps nothing of a wait that ended (aborted or timed out) while its child stays busy', async () => {
    const hold = gate()
    const h = await hosts.open({ persistence: false, driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'go', id: 'kid' })
    const aborted = AbortSignal.abort()
    // Warm up the paths first, so the measure below sees only what waits keep.
    for (let i = 0; i < 1_000; i++) await codeOf(h.runtime.wait(['kid'], { caller: parent, signal: aborted }))
    const waits = 40_000
    const before = heapAfterGc()
    for (let i = 0; i < waits; i++) await codeOf(h.runtime.wait(['kid'], { caller: parent, signal: aborted }))
    const [timedOut] = await h.runtime.wait(['kid'], { caller: parent, timeoutMs: 0 })
    const grown = heapAfterGc() - before
    expect(timedOut).toEqual({ id: 'kid', state: 'running', queued: 0 })
    // A wait kept alive on the busy child costs hundreds of bytes; 40,000 of them would be tens of MB.
    expect(grown).toBeLessThan(waits * 50)
    hold.open()
    expect((await child.done).end).toBe('completed')
    const [settled] = await h.runtime.wait(['kid'], { caller: parent, timeoutMs: 0 })
    expect(settled).toMatchObject({ state: 'settled', reason: 'completed' })
  })

  it('still wakes every pending wait when the child goes idle', async () => {
    const hold = gate()
    const h = await hosts.open({ persistence: false, driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create({ id: 'parent' })
    h.runtime.spawn(parent, { mode: 'continuable', label: 'a', context: 'fresh', prompt: 'go', id: 'a' })
    h.runtime.spawn(parent, { mode: 'continuable', label: 'b', context: 'fresh', prompt: 'go', id: 'b' })
    const pending = [
      h.runtime.wait(['a', 'b'], { caller: parent, timeoutMs: 600_000 }),
      h.runtime.wait(['b'], { caller: parent, timeoutMs: 600_000 }),
    ]
    hold.open()
    const [both, onlyB] = await Promise.all(pending)
    expect(both!.map((e) => e.state)).toEqual(['settled', 'settled'])
    expect(onlyB!.map((e) => e.state)).toEqual(['settled'])
  })
})

describe('wait: an id that is not the caller’s child refuses the whole call', () => {
  it('rejects SUBAGENT_UNAUTHORIZED wherever the foreign id stands, waiting for nothing and changing nothing', async () => {
    const hold = gate()
    const h = await hosts.open({
      driver: createScriptedDriver((run) =>
        run.identity?.label === 'held' ? holdScript(hold.promise) : [{ kind: 'message', text: 'done' }],
      ),
    })
    const parent = h.sessions.create({ id: 'parent' })
    const other = h.sessions.create({ id: 'other' })
    const held = h.runtime.spawn(parent, { mode: 'continuable', label: 'held', context: 'fresh', prompt: 'go', id: 'held' })
    await h.runtime.send('held', { caller: parent, text: 'later' })
    await h.runtime.spawn(parent, { mode: 'one-shot', label: 'cold', context: 'fresh', id: 'cold' }).done
    await h.runtime.spawn(other, { mode: 'one-shot', label: 'foreign', context: 'fresh', id: 'foreign' }).done
    const stored = async (id: string) => (await h.persistence!.inspect(id as never)).events.length
    const before = {
      parent: parent.events.length,
      other: other.events.length,
      cold: await stored('cold'),
      foreign: await stored('foreign'),
    }
    // The held child never settles while its gate is closed: each call ends by its refusal, not by a timeout.
    for (const ids of [
      ['held', 'cold', 'foreign'],
      ['foreign', 'held'],
      ['held', 'foreign', 'ghost'],
    ]) {
      expect(await codeOf(h.runtime.wait(ids, { caller: parent, timeoutMs: 600_000 }))).toBe('SUBAGENT_UNAUTHORIZED')
    }
    expect(h.runtime.isRunning('held')).toBe(true)
    expect(h.runtime.queuedCount('held')).toBe(1)
    expect({
      parent: parent.events.length,
      other: other.events.length,
      cold: await stored('cold'),
      foreign: await stored('foreign'),
    }).toEqual(before)
    // The caller's own children alone are waited for as ever, and the foreign one by its own parent.
    hold.open()
    expect((await h.runtime.wait(['held', 'cold'], { caller: parent })).map((e) => e.state)).toEqual(['settled', 'settled'])
    expect((await h.runtime.wait(['foreign'], { caller: other })).map((e) => e.state)).toEqual(['settled'])
    expect((await held.done).end).toBe('completed')
  })
})
