// `@dsh/session-persistence`: the contract as an application uses it — the
// `SessionPersistence` types, the error class, event runs (what `append`
// takes), the coordinator and its plugin, shared reads and the in-memory
// backend. What only a backend implementation needs (the append check, the
// crash-repair rule, the error constructors) is `./backend`.

export type { AttachmentInput, PersistedAttachments } from './attachment-helpers.js'
export { appendUserMessage, attachmentBlock, attachmentResolver } from './attachment-helpers.js'
export { ATTACHMENT_MAX_BYTES } from './attachments.js'
export type { CoordinatorSessionStatus, PersistenceCoordinatorOptions, UnstoredSession } from './coordinator.js'
export { SessionPersistenceCoordinator } from './coordinator.js'
export type { SessionPersistenceErrorCode } from './errors.js'
export { SessionPersistenceError } from './errors.js'
export type { AppendedEvent, FlatValue, StoredEventRun } from './event-runs.js'
export { appendedEventCount, eventCount, expandEventRuns, isEventRun } from './event-runs.js'
export type { MemoryPersistenceOptions } from './memory.js'
export { createMemoryPersistence, MemoryPersistenceStorage } from './memory.js'
export type { SessionPersistencePluginOptions } from './plugin.js'
export { sessionPersistencePlugin } from './plugin.js'
export type { SessionRepairRule } from './repair.js'
export { SessionRepairs } from './repair.js'
export type { SharedReadsOptions, SharedReadsPersistence, SharedReadsStats } from './shared-reads.js'
export { withSharedReads } from './shared-reads.js'
export type {
  AppendResult,
  AppendTarget,
  AttachmentPutOptions,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  PersistenceMetrics,
  SessionChangeCursor,
  SessionChanges,
  SessionObservation,
  SessionPersistence,
  SessionRange,
  SessionRangeObservation,
  SessionRescanReason,
  SessionRevision,
  SessionSuffixObservation,
  SessionWriter,
} from './types.js'
