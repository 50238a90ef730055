// `@dsh/session-persistence-postgres/backend`: for PostgreSQL backend
// packages that share this package's pool and tables (the query and
// checkpoint-cache backends), not for applications.
//
// - `defineSchema`: declare a schema component of one's own tables, so every
//   package migrates, opens and refuses a newer schema alike; `partitionsOf`
//   and `Layout`: hash-partition a per-session table like the session tables.
// - `keyOf`, `revisionOf`: read `dsh_sessions` directly, with the same keys
//   and revisions this backend writes.
// - `subscribeChanges`: LISTEN for committed changes on a pool.
// - `listenChannel`, `Backoff`: a LISTEN of one's own channel that survives
//   a server outage, and the bounded backoff of any background loop.
// - `isUnreachable`: whether a driver failure means the server cannot be
//   reached now (refused, lost, shutting down).
// - `SESSION_MIGRATIONS`, `SESSIONS_COMPONENT`: the session tables' steps, so
//   a backend's upgrade tests can build a database at an older version.
// - `watchPool`: keep a shared pool's dropped connections (idle or just
//   opened) from ending the process.
//
// `MigrationReport` and `ChangeSubscription` are on the main entry as well:
// an application receives them from `migrate` and `subscribe`.
export { Backoff, RETRY_CAP_MS, RETRY_FIRST_MS, retryDelay } from './backoff.js'
export type { ChangeSubscription, ChangeSubscriptionOptions } from './change-feed.js'
export { subscribeChanges } from './change-feed.js'
export { isUnreachable } from './errors.js'
export { keyOf } from './ids.js'
export type { Layout } from './layout.js'
export { DEFAULT_PARTITIONS, partitionsOf } from './layout.js'
export type { ChannelHandlers, ChannelListener } from './listener.js'
export { listenChannel } from './listener.js'
export { revisionOf } from './log-reader.js'
export type { MigrateOptions, Migration, MigrationReport, SchemaComponent, SchemaOptions } from './migrations.js'
export { defineSchema } from './migrations.js'
export { watchPool } from './pool.js'
export { SESSION_MIGRATIONS, SESSIONS_COMPONENT } from './schema.js'
