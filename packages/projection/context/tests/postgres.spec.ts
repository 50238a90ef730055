import { openTestDatabase, startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { afterAll, beforeAll } from 'vitest'
import { coldReadCases } from './cold-cases.js'

// A throwaway cluster of this file's own; each case gets a fresh database.
let cluster: TestCluster | undefined
beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
})
afterAll(async () => {
  await cluster?.stop()
})

coldReadCases('postgres', async () => {
  const db = await openTestDatabase(cluster as TestCluster)
  return { pool: db.pool, end: () => db.end() }
})
