import { getEventListeners } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { BACKENDS, openPlace, type Place } from './backends.js'
import type { Host } from './helpers.js'
import { completedTurn, gate, queryProbe } from './helpers.js'

const places: Place[] = []
afterEach(async () => {
  for (const place of places.splice(0)) await place.close()
})

const CHILDREN = 200

/** `count` settled children of a new parent, built by hand and disposed (cold). */
async function coldChildren(h: Host, count: number): Promise<string> {
  const parent = h.sessions.create({ id: 'parent' })
  for (let i = 0; i < count; i++) {
    const child = h.sessions.create({
      id: `child-${String(i).padStart(3, '0')}`,
      origin: 'subagent',
      parentSession: parent.id,
      delegationDepth: 1,
    })
    child.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p', label: `c${i}` })
    completedTurn(child, 1)
    await h.sessions.dispose(child.id)
  }
  return parent.id
}

describe.each(BACKENDS)('a listing and its caller signal (%s)', (backend) => {
  it(`adds one abort listener to the caller's signal for ${CHILDREN} cold children at concurrency 64, and removes it`, async () => {
    const place = await openPlace(backend)
    places.push(place)
    const probe = queryProbe()
    const h = await place.open({ cache: false, query: probe.wrap, coldReadConcurrency: 64 })
    const parentId = await coldChildren(h, CHILDREN)
    const warnings: Error[] = []
    const onWarning = (warning: Error): void => void warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const controller = new AbortController()
      const before = getEventListeners(controller.signal, 'abort').length
      let most = before
      probe.beforeObserve = () => {
        most = Math.max(most, getEventListeners(controller.signal, 'abort').length)
      }
      probe.afterObserve = probe.beforeObserve
      const rows = await h.runtime.listChildren(parentId, controller.signal)
      expect(rows).toHaveLength(CHILDREN)
      expect(rows.every((row) => row.kind === 'child' && row.activity === 'inactive')).toBe(true)
      expect(probe.calls.observeSession).toBe(CHILDREN)
      expect(probe.maxInFlight).toBe(64)
      expect(most - before).toBe(1)
      expect(getEventListeners(controller.signal, 'abort').length).toBe(before)

      // The same for the subtree, and for a listing the caller aborts half way.
      expect(await h.runtime.listDescendants(parentId, controller.signal)).toHaveLength(CHILDREN)
      expect(getEventListeners(controller.signal, 'abort').length).toBe(before)
      const aborting = new AbortController()
      const stall = gate()
      let seen = 0
      probe.beforeObserve = () => {
        if (++seen === 100) aborting.abort()
        return seen >= 100 ? stall.promise : undefined
      }
      probe.afterObserve = () => {}
      await expect(h.runtime.listChildren(parentId, aborting.signal)).rejects.toMatchObject({ code: 'CANCELLED' })
      expect(getEventListeners(aborting.signal, 'abort')).toHaveLength(0)
      stall.open()
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onWarning)
    }
    expect(warnings.map((w) => w.name)).not.toContain('MaxListenersExceededWarning')
  })
})
