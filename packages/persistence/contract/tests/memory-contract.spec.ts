import { randomUUID } from 'node:crypto'
import { parseSessionHeader, SessionLogOffset, SessionSeq } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import type { SessionPersistence } from '../src/index.js'
import { createMemoryPersistence, MemoryPersistenceStorage } from '../src/index.js'
import { describePersistenceContract, type PersistenceContractHarness } from '../src/testing/index.js'
import { memoryFaults } from './support.js'

// Roots of the in-memory backend are keys into this registry of storages.
const storages = new Map<string, MemoryPersistenceStorage>()

describePersistenceContract('memory', (options): PersistenceContractHarness => {
  const owned = options?.root === undefined
  const root = options?.root ?? `memory-${randomUUID()}`
  let storage = storages.get(root)
  if (storage === undefined) {
    storage = new MemoryPersistenceStorage()
    storages.set(root, storage)
  }
  const instances: SessionPersistence[] = [createMemoryPersistence({ storage })]
  return {
    ...memoryFaults(storage),
    async storedAttachments() {
      return [...storage.blobs].map(([digest, bytes]) => ({ place: digest, bytes: bytes.length }))
    },
    persistence: instances[0]!,
    root,
    async reopen() {
      await instances.at(-1)!.close()
      const next = createMemoryPersistence({ storage })
      instances.push(next)
      return next
    },
    async cleanup() {
      for (const instance of instances) await instance.close()
      if (owned) storages.delete(root)
    },
  }
})

describe('memory backend specifics', () => {
  it('appends read no header; list reads one header per session', async () => {
    const p = createMemoryPersistence()
    const header = parseSessionHeader({ version: 1, id: 'x', createdAt: 1, isSeeded: false, delegationDepth: 0 })
    for (let i = 0; i < 5; i++)
      await p.append({ header, inheritedEventCount: SessionLogOffset(0) }, [{ type: 'n', seq: SessionSeq(i), time: i, data: i }])
    expect(p.metrics).toMatchObject({ headerReads: 0, bodyReads: 0, bytesRead: 0, appends: 5 })
    await p.list()
    expect(p.metrics.headerReads).toBe(1)
    expect(p.metrics.bodyReads).toBe(0)
  })

  it('load stamps repair events with the configured clock', async () => {
    const p = createMemoryPersistence({ clock: () => 1234 })
    const header = parseSessionHeader({ version: 1, id: 'x', createdAt: 1, isSeeded: false, delegationDepth: 0 })
    await p.append({ header, inheritedEventCount: SessionLogOffset(0) }, [
      { type: 'turn/start', seq: SessionSeq(0), time: 1, data: { turn: 3 } },
    ])
    const loaded = await p.load(header.id)
    expect(loaded.events[1]).toEqual({ type: 'turn/end', seq: 1, time: 1234, data: { turn: 3, reason: 'interrupted' } })
  })
})
