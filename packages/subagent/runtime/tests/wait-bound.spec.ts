import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterEach, describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { codeOf, createHost, gate, type Host, holdScript } from './helpers.js'

const hosts: Host[] = []
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.dispose()
})

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
    const h = await createHost({ persistence: false, driver: createScriptedDriver(holdScript(hold.promise)) })
    hosts.push(h)
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
    const h = await createHost({ persistence: false, driver: createScriptedDriver(holdScript(hold.promise)) })
    hosts.push(h)
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
