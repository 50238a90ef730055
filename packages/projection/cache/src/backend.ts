/**
 * `@dsh/session-projection-cache/backend`: what another checkpoint cache
 * backend (e.g. `@dsh/session-projection-cache-postgres`) shares with the
 * SQLite cache, so that every backend checkpoints at the same moments and
 * identifies lifecycles alike. Not for applications: they use the main entry.
 */
export { provideCheckpointCache } from './activate.js'
export type { CheckpointCacheCoreOptions, DeletedSessionFeed, EncodedCheckpointRow } from './core.js'
export { CheckpointCacheCore, decodeCheckpointRow, poisonedRow } from './core.js'
export { checkpointIdentity, rowWitness } from './identity.js'
export type { CheckpointThrottle, CheckpointWriter, InvalidOptions } from './scheduler.js'
export { CheckpointScheduler, DEFAULT_THROTTLE, FORGET_EVERY_COLD } from './scheduler.js'
