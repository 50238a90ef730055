import pg from 'pg'
import { createTestDatabase, type TestClusterAddress } from './cluster.js'

/** A fresh database on a throwaway cluster, with a pool over it. */
export interface TestDatabase {
  readonly url: string
  readonly pool: pg.Pool
  /** Ends the pool (errors of an already-ended pool are ignored); the database stays until the cluster stops. */
  end(): Promise<void>
}

/**
 * Creates a fresh database on `cluster` and opens a pool over it (8
 * connections unless `options` say otherwise). Pool errors (a connection a
 * test killed on purpose) are swallowed: the test observes them through its
 * own queries.
 */
export async function openTestDatabase(cluster: TestClusterAddress, options: pg.PoolConfig = {}): Promise<TestDatabase> {
  const url = await createTestDatabase(cluster)
  const pool = new pg.Pool({ connectionString: url, max: 8, ...options })
  pool.on('error', () => {})
  return { url, pool, end: () => pool.end().catch(() => {}) }
}
