export { persistenceCancelled, SessionPersistenceError } from './errors.js'
export type { SessionPersistenceErrorCode } from './errors.js'
export { createMemoryPersistence, MemoryPersistenceStorage } from './memory.js'
export type { MemoryPersistenceOptions } from './memory.js'
export { interruptedTurnEnds } from './repair.js'
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
  SessionRevision,
} from './types.js'
