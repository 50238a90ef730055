// `@dsh/session-persistence/backend`: what a persistence backend uses at run
// time — the error class, the cancellation error, event runs, the append
// check and the crash-repair rule — and nothing else, so that a backend
// opened by a one-shot command (`dsh sessions`) does not load the
// coordinator or the in-memory backend. The same module files as the main entry: one place for
// each rule, two doors.
export type { SessionPersistenceErrorCode } from './errors.js'
export { persistenceCancelled, persistenceError, SessionPersistenceError } from './errors.js'
export type { AppendedEvent, FlatValue, StoredEventRun } from './event-runs.js'
export { appendedEventCount, eventCount, expandEventRuns, isEventRun } from './event-runs.js'
export { interruptedTurnEnds } from './repair.js'
export type { StoredAppendState } from './validate.js'
export { checkAppend } from './validate.js'
