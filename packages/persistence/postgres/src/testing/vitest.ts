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
import { afterAll, afterEach, beforeAll, inject } from 'vitest'
import { startTestCluster, type TestCluster, type TestClusterAddress } from './cluster.js'
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

/**
 * A throwaway cluster of the calling spec file's own, for tests that stop its
 * server (an outage) while the run's shared cluster serves other files.
 * Registers the file's hooks: the cluster starts before its tests, its server
 * is started again after each test that left it stopped, and it is removed
 * after them. `rejections` collects the file's unhandled rejections (an
 * outage test asserts it stays empty).
 */
export function outageCluster(): { readonly cluster: () => TestCluster; readonly rejections: unknown[] } {
  let cluster: TestCluster | undefined
  const rejections: unknown[] = []
  const onRejection = (reason: unknown) => {
    rejections.push(reason)
  }
  beforeAll(async () => {
    process.on('unhandledRejection', onRejection)
    cluster = await startTestCluster({ settings: { fsync: 'off' } })
  }, 120_000)
  afterEach(async () => {
    await cluster?.startServer().catch(() => {})
  })
  afterAll(async () => {
    process.off('unhandledRejection', onRejection)
    await cluster?.stop()
  })
  return {
    cluster: () => {
      if (cluster === undefined) throw new Error('outageCluster(): the cluster starts in beforeAll; use it inside a test.')
      return cluster
    },
    rejections,
  }
}

/**
 * Resolves once `check()` holds, polling `everyMs` apart at most `tries`
 * times — bounded by a count, generous by default (60 s of waiting); rejects
 * naming `what` otherwise.
 */
export async function until(check: () => boolean, what: string, { tries = 3000, everyMs = 20 } = {}): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  throw new Error(`Still not true after ${tries} polls: ${what}.`)
}
