// `@dsh/session-persistence-postgres`: what an application opens and
// operates. What another PostgreSQL backend package needs to share the pool
// and the tables is `./backend`; the test cluster is `./testing`.
export type { ChangeSubscription } from './change-feed.js'
export type { PostgresPersistenceErrorCode } from './errors.js'
export { PostgresPersistenceError } from './errors.js'
export type { MigrateOptions, MigrationReport } from './migrations.js'
export { createPostgresPersistence } from './persistence.js'
export type { PoolConfigOptions } from './pool.js'
export { DEFAULT_CONNECT_TIMEOUT_MS, poolConfig } from './pool.js'
export { migrate } from './schema.js'
export type { DamagedLog, LogVerification, PostgresPersistence, PostgresPersistenceMetrics, PostgresPersistenceOptions } from './types.js'
