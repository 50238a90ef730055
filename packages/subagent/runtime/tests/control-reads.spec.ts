import type { SessionId } from '@dsh/session'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { bodyReads, type Host, hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

/** A parent `p` with child `c`, which has child `g`; every run settled, `c` and `g` cold; then a fresh host on the same storage. */
async function coldFamily(): Promise<Host> {
  const storage = new MemoryPersistenceStorage()
  const first = await hosts.open({ storage, driver: createScriptedDriver([{ kind: 'message', text: 'done' }]) })
  const parent = first.sessions.create({ id: 'p' })
  await first.runtime.spawn(parent, { mode: 'continuable', label: 'c', context: 'fresh', prompt: 'go', id: 'c' }).done
  const child = await first.runtime.resume('c', { caller: parent })
  const grandchild = first.runtime.spawn(child.session, { mode: 'continuable', label: 'g', context: 'fresh', prompt: 'go', id: 'g' })
  await grandchild.done
  // `c` waits for `g`, whose settlement wakes it for one more run before it goes cold.
  await first.runtime.wait(['c'], { caller: parent })
  await first.sessions.flush(parent)
  const second = await hosts.open({ storage })
  const loaded = await second.persistence!.load('p' as SessionId)
  second.sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
  return second
}

describe('control of cold children: authorization reads headers, not logs', () => {
  it('interrupts a cold child (nothing runs) without reading its log', async () => {
    const h = await coldFamily()
    const parent = h.sessions.get('p')!
    const reads = bodyReads(h)
    expect(await h.runtime.interrupt('c', { caller: parent })).toBe(false)
    expect(bodyReads(h) - reads).toBe(0)
  })

  it('waits for a cold grandchild with one read of its log, none of the cold child between', async () => {
    const h = await coldFamily()
    const parent = h.sessions.get('p')!
    const reads = bodyReads(h)
    expect(await h.runtime.wait(['g'], { caller: parent, timeoutMs: 0 })).toEqual([
      { id: 'g', state: 'settled', reason: 'completed', text: 'done' },
    ])
    expect(bodyReads(h) - reads).toBe(1)
  })
})
