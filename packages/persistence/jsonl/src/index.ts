export { JOURNAL_FILE } from './change-journal.js'
export { createJsonlPersistence } from './create.js'
export type { JsonlPersistenceErrorCode } from './errors.js'
export { JsonlPersistenceError } from './errors.js'
export { decodeSessionDirName, encodeSessionDirName, MAX_DIRECT_NAME } from './id-encoding.js'
export { MARKER_FILE } from './root-marker.js'
export { TRAILER_MAGIC } from './trailer.js'
export type {
  ChangeJournalVerification,
  DamagedLog,
  JsonlCompression,
  JsonlPersistence,
  JsonlPersistenceMetrics,
  JsonlPersistenceOptions,
  LogLessDir,
  LogVerification,
} from './types.js'
