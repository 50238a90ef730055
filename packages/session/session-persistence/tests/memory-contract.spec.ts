import { randomUUID } from 'node:crypto'
import { describePersistenceContract, type PersistenceContractHarness } from '../src/contract-suite.js'
import { createMemoryPersistence, MemoryPersistenceStorage } from '../src/index.js'
import type { SessionPersistence } from '../src/index.js'

// Roots of the in-memory backend are keys into this registry of storages.
const storages = new Map<string, MemoryPersistenceStorage>()

describePersistenceContract('memory', (options): PersistenceContractHarness => {
  const owned = options?.root === undefined
  const root = options?.root ?? `memory-${randomUUID()}`
  let storage = storages.get(root)
  if (storage === undefined) storages.set(root, (storage = new MemoryPersistenceStorage()))
  const instances: SessionPersistence[] = [createMemoryPersistence({ storage })]
  return {
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
