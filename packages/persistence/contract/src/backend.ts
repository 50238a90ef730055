// `@dsh/session-persistence/backend`: what a persistence backend uses at run
// time, and nothing else, so that a backend opened by a one-shot command
// (`dsh sessions`) does not load the coordinator or the in-memory backend.
//
// Only here: the error constructors (`persistenceError`,
// `persistenceCancelled`), the append check (`checkAppend`), the
// crash-repair rules (`interruptedTurnEnds`, `SessionRepairs`) and the bounds of ranged reads
// (`checkRange`, `rangeBounds`). Also on the main entry, because
// an application uses them too: the error class (to catch) and the event-run
// helpers (to build what `append` takes), with the types their signatures
// name. The other contract types are imported from the main entry
// (`import type` loads nothing).

// The size caps a backend applies, as `@dsh/protocol/limits` declares them.
export type { ElidedEventData } from '@dsh/protocol/limits'
export { ELIDED_EVENT_TYPE, EVENT_MAX_BYTES, ID_MAX_LENGTH, idFault, LINE_MAX_BYTES } from '@dsh/protocol/limits'
// Attachments: the input checks, the cap and the typed errors every backend shares.
export type { CheckedAttachment } from './attachments.js'
export {
  ATTACHMENT_MAX_BYTES,
  attachmentNotFound,
  checkAttachment,
  checkAttachmentCap,
  checkAttachmentSession,
  checkDigest,
  digestMatches,
  sha256Hex,
} from './attachments.js'
export type { SessionPersistenceErrorCode } from './errors.js'
export { persistenceCancelled, persistenceError, SessionPersistenceError } from './errors.js'
export type { AppendedEvent, FlatValue, StoredEventRun } from './event-runs.js'
export { appendedEventCount, eventCount, expandEventRuns, isEventRun } from './event-runs.js'
export { CappedLines, elidedLineEvents } from './long-lines.js'
export type { CheckedRange, RangeBounds } from './range.js'
export { checkRange, rangeBounds } from './range.js'
export type { SessionRepairRule } from './repair.js'
export { interruptedTurnEnds, SessionRepairs } from './repair.js'
export type { AttachmentPutOptions } from './types.js'
export type { StoredAppendState } from './validate.js'
export { checkAppend, checkEventBytes, checkId, eventLine, isFrozenTree, losslessData, unencodable } from './validate.js'
