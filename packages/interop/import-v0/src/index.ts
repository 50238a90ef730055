export { MIN_RUN, packChunkRuns } from './chunk-rows.js'
export {
  CONVERTED_TYPES,
  DSH_IGNORABLE_TYPES,
  toDshEvent,
  toDshHeader,
  toV0Event,
  toV0Header,
  V0_EVENT_TYPE,
  V0_PREFIX,
  V0_RESIDUAL_KEY,
} from './convert.js'
export type { ImportV0ErrorCode } from './errors.js'
export { ImportV0Error } from './errors.js'
export type { ExportV0Options, ExportV0Result } from './export.js'
export { exportV0 } from './export.js'
export type { ImportProgress, ImportV0Options, ImportV0Report, SessionImportResult, SessionImportStatus } from './import.js'
export { importV0 } from './import.js'
export type { V0Compression } from './layout.js'
export { decodeSegment, encodeSegment, NO_CWD_DIR, PLAIN_LOG, projectKey, v0LogPath, ZSTD_LOG } from './layout.js'
export type { V0LogEntry, V0RootFault, V0RootScan } from './listing.js'
export { isV0Root, listV0Logs, scanV0Root } from './listing.js'
export type { V0Log } from './reader.js'
export { parseV0Log, readV0Log } from './reader.js'
export type { V0Event, V0Header } from './v0-types.js'
export { headerLineText, parseHeaderLine, V0_FORMAT_VERSION } from './v0-types.js'
export type { V0WriteOptions } from './writer.js'
export { appendV0Batch, v0BatchBytes, v0LogBytes, writeV0Log } from './writer.js'
export { decodeFrames, encodeFrame } from './zstd-frames.js'
