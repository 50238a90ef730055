export { SessionPersistenceError } from './errors.js'
export type { SessionPersistenceErrorCode } from './errors.js'
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
