import { startTestCluster, type TestClusterAddress } from './cluster.js'

/** The part of vitest's `TestProject` a global setup uses (vitest stays an optional peer). */
export interface ProvidingProject {
  provide(key: 'dshPostgres', value: TestClusterAddress): void
}

/**
 * A vitest `globalSetup`: one cluster for the whole run, its address provided
 * as `dshPostgres` (read it with `inject('dshPostgres')`), stopped in the
 * teardown — and by a process exit handler when the run dies first.
 */
export async function vitestGlobalSetup(project: ProvidingProject): Promise<() => Promise<void>> {
  const cluster = await startTestCluster({ settings: { fsync: 'off', synchronous_commit: 'on' } })
  project.provide('dshPostgres', {
    host: cluster.host,
    port: cluster.port,
    user: cluster.user,
    dataDir: cluster.dataDir,
    binDir: cluster.binDir,
  })
  return () => cluster.stop()
}
