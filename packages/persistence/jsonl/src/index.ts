export { JOURNAL_FILE } from './change-journal.js'
export type { JsonlCompression } from './codec.js'
export { createJsonlPersistence } from './create.js'
export type { JsonlPersistenceErrorCode } from './errors.js'
export { JsonlPersistenceError } from './errors.js'
export { decodeSessionDirName, encodeSessionDirName, MAX_DIRECT_NAME } from './id-encoding.js'
export type {
  ChangeJournalVerification,
  DamagedLog,
  JsonlPersistence,
  JsonlPersistenceMetrics,
  JsonlPersistenceOptions,
  LogVerification,
} from './persistence.js'
export { MARKER_FILE } from './root-marker.js'
export { TRAILER_MAGIC } from './trailer.js'
