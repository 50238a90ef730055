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
 *
 * `createReaderRole` gives a role that may only read (SELECT, read-only
 * transactions), for tests of code that must never write.
 *
 * Also: `generateHeaderSessions` writes many stored sessions server-side in
 * the backend's row layout (benchmarks, migration tests), and
 * `distributionViolations` reads the catalog and reports per-session tables
 * that break the partitioning rules.
 */

export type { StartTestClusterOptions, TestCluster, TestClusterAddress } from './cluster.js'
export { clusterUrl, createTestDatabase, DEFAULT_PG_BIN, startTestCluster } from './cluster.js'
export type { TestDatabase } from './database.js'
export { createReaderRole, openTestDatabase } from './database.js'
export type { DistributionViolation } from './distribution.js'
export { distributionViolations } from './distribution.js'
export type { GenerateSessionsOptions } from './generate.js'
export { generateHeaderSessions } from './generate.js'
export { vitestGlobalSetup } from './global-setup.js'
