import { rmSync } from 'node:fs'
import type { SessionPersistence } from '@dsh/session-persistence'
import {
  describePersistenceContract,
  type PersistenceContractFactoryOptions,
  type PersistenceContractHarness,
} from '@dsh/session-persistence/testing'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { tempDir } from './helpers.js'

function harness(compression: JsonlCompression) {
  return (options?: PersistenceContractFactoryOptions): PersistenceContractHarness => {
    const owned = options?.root === undefined ? tempDir() : undefined
    const root = options?.root ?? owned!.dir
    const instances: SessionPersistence[] = [createJsonlPersistence({ root, compression })]
    return {
      get persistence() {
        return instances[0]!
      },
      root,
      async reopen() {
        await instances.at(-1)!.close()
        const next = createJsonlPersistence({ root, compression })
        instances.push(next)
        return next
      },
      async cleanup() {
        for (const instance of instances) await instance.close()
        if (owned) rmSync(owned.dir, { recursive: true, force: true })
      },
    }
  }
}

describePersistenceContract('jsonl (zstd)', harness('zstd'))
describePersistenceContract('jsonl (none)', harness('none'))
