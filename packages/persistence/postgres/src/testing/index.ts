/**
 * Test support (subpath `@dsh/session-persistence-postgres/testing`): a
 * throwaway PostgreSQL cluster per test run and a fresh database per suite.
 *
 * ```ts
 * // vitest.config.ts: test.globalSetup = ['tests/global-setup.ts']
 * // tests/global-setup.ts
 * export { vitestGlobalSetup as default } from '@dsh/session-persistence-postgres/testing'
 * // a spec file
 * const url = await createTestDatabase(inject('dshPostgres'))
 * // or, with a pool: openTestDatabase(address) here, freshDatabase() from /testing/vitest
 * ```
 */

export type { StartTestClusterOptions, TestCluster, TestClusterAddress } from './cluster.js'
export { clusterUrl, createTestDatabase, DEFAULT_PG_BIN, startTestCluster } from './cluster.js'
export type { TestDatabase } from './database.js'
export { openTestDatabase } from './database.js'
export { vitestGlobalSetup } from './global-setup.js'
