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

/**
 * A login role on the database at `url` that may only read: SELECT on every
 * table that exists now (create it after the tables), and every transaction
 * read-only by default. Returns the database's URL as
 * that role. Tests of code that must never write run it as this role, so any
 * write fails. `readOnlyTransactions: false` leaves its transactions
 * read-write and takes CREATE on schema `public` from everyone, so a write
 * fails on privileges instead (a role without CREATE).
 */
export async function createReaderRole(url: string, options: { readonly readOnlyTransactions?: boolean } = {}): Promise<string> {
  const address = new URL(url)
  const prefix = options.readOnlyTransactions === false ? 'select' : 'reader'
  const role = `${prefix}_${address.pathname.slice(1)}`.replace(/[^a-z0-9_]/gi, '_').toLowerCase()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`CREATE ROLE ${role} LOGIN`)
    await client.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`)
    if (options.readOnlyTransactions === false) await client.query('REVOKE CREATE ON SCHEMA public FROM PUBLIC')
    else await client.query(`ALTER ROLE ${role} SET default_transaction_read_only = on`)
  } finally {
    await client.end()
  }
  address.username = role
  return address.toString()
}
