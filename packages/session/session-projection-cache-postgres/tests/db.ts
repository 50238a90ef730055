import type { TestClusterAddress } from '@dsh/session-persistence-postgres/testing'
import { createTestDatabase } from '@dsh/session-persistence-postgres/testing'
import pg from 'pg'
import { inject } from 'vitest'

declare module 'vitest' {
  export interface ProvidedContext {
    dshPostgres: TestClusterAddress
  }
}

export function cluster(): TestClusterAddress {
  return inject('dshPostgres')
}

/** A fresh database on the run's cluster, and a pool over it. */
export async function freshDatabase(options: pg.PoolConfig = {}): Promise<{ url: string; pool: pg.Pool; end(): Promise<void> }> {
  const url = await createTestDatabase(cluster())
  const pool = new pg.Pool({ connectionString: url, max: 8, ...options })
  pool.on('error', () => {})
  return { url, pool, end: () => pool.end().catch(() => {}) }
}
