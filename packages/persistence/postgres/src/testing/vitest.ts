/**
 * Test support for vitest specs (subpath
 * `@dsh/session-persistence-postgres/testing/vitest`; `vitest` is an optional
 * peer, loaded only here): the run's throwaway cluster, provided by
 * `vitestGlobalSetup`, and a fresh database with a pool per call.
 *
 * ```ts
 * const db = await freshDatabase()
 * try { ... db.pool ... } finally { await db.end() }
 * ```
 */
import { inject } from 'vitest'
import type { TestClusterAddress } from './cluster.js'
import { openTestDatabase, type TestDatabase } from './database.js'

declare module 'vitest' {
  export interface ProvidedContext {
    dshPostgres: TestClusterAddress
  }
}

/** The address of the run's cluster (started by `vitestGlobalSetup` in the project's `globalSetup`). */
export function testCluster(): TestClusterAddress {
  return inject('dshPostgres')
}

/** A fresh database on the run's cluster, and a pool over it (8 connections unless `options` say otherwise). */
export function freshDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  return openTestDatabase(testCluster(), options)
}

type TestDatabaseOptions = Parameters<typeof openTestDatabase>[1]
