export { SessionProjectionError } from './errors.js'
export type { SessionProjectionErrorCode } from './errors.js'
export type {
  ProjectionChange,
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionSnapshot,
  SessionProjectionMap,
  SessionProjections,
  SessionProjectionStateMap,
  SessionProjectionUnit,
} from './types.js'
