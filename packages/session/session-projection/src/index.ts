export { SessionProjectionError } from './errors.js'
export type { SessionProjectionErrorCode } from './errors.js'
export { createProjectionRegistry, ProjectionRegistry } from './registry.js'
export type { ProjectionRegistryOptions } from './registry.js'
export { sessionProjectionsPlugin } from './plugin.js'
export type {
  ProjectionChange,
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionMetrics,
  ProjectionSnapshot,
  SessionProjectionMap,
  SessionProjections,
  SessionProjectionStateMap,
  SessionProjectionUnit,
} from './types.js'
