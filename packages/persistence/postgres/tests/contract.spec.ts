import { randomUUID } from 'node:crypto'
import type { SessionPersistence } from '@dsh/session-persistence'
import {
  describePersistenceContract,
  type PersistenceContractFactoryOptions,
  type PersistenceContractHarness,
} from '@dsh/session-persistence/testing'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { createTestDatabase } from '@dsh/session-persistence-postgres/testing'
import { testCluster } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'

// A contract "root" is a database on the run's cluster.
describePersistenceContract('postgres', async (options?: PersistenceContractFactoryOptions): Promise<PersistenceContractHarness> => {
  const owned = options?.root === undefined
  const root = options?.root ?? (await createTestDatabase(testCluster(), `c_${randomUUID().replaceAll('-', '')}`))
  const pools: pg.Pool[] = []
  const open = async (): Promise<SessionPersistence> => {
    const pool = new pg.Pool({ connectionString: root, max: 4 })
    pools.push(pool)
    return createPostgresPersistence({ pool })
  }
  const instances: SessionPersistence[] = [await open()]
  return {
    get persistence() {
      return instances[0]!
    },
    root,
    async reopen() {
      await instances.at(-1)!.close()
      const next = await open()
      instances.push(next)
      return next
    },
    async cleanup() {
      for (const instance of instances) await instance.close()
      for (const pool of pools) await pool.end()
      if (owned) {
        const admin = new pg.Client({ connectionString: root.replace(/\/[^/]+$/, '/postgres') })
        await admin.connect()
        const name = new URL(root).pathname.slice(1)
        const { rows } = await admin.query<{ q: string }>('SELECT quote_ident($1) AS q', [name])
        await admin.query(`DROP DATABASE IF EXISTS ${rows[0]!.q} WITH (FORCE)`)
        await admin.end()
      }
    },
  }
})
