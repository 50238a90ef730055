export { SessionPersistenceCoordinator } from './coordinator.js'
export type { CoordinatorSessionStatus, PersistenceCoordinatorOptions } from './coordinator.js'
export { persistenceCancelled, SessionPersistenceError } from './errors.js'
export type { SessionPersistenceErrorCode } from './errors.js'
export { createMemoryPersistence, MemoryPersistenceStorage } from './memory.js'
export type { MemoryPersistenceOptions } from './memory.js'
export { sessionPersistencePlugin } from './plugin.js'
export type { SessionPersistencePluginOptions } from './plugin.js'
export { interruptedTurnEnds } from './repair.js'
export { withSharedReads } from './shared-reads.js'
export type { SharedReadsOptions, SharedReadsPersistence, SharedReadsStats } from './shared-reads.js'
export { checkAppend } from './validate.js'
export type { StoredAppendState } from './validate.js'
export type {
  AppendResult,
  AppendTarget,
  LoadedSession,
  PersistedSessionRecord,
  PersistenceMetrics,
  SessionObservation,
  SessionPersistence,
  SessionChangeCursor,
  SessionChanges,
  SessionRevision,
  SessionSuffixObservation,
} from './types.js'
