// Units declare their checkpoint schema with this zod, the one the registry's
// types are written against (a second zod copy would not type-check as a schema).
export { z } from 'zod'
export type { SessionProjectionErrorCode } from './errors.js'
export { SessionProjectionError } from './errors.js'
export { sessionProjectionsPlugin } from './plugin.js'
export type { ProjectionRegistryOptions } from './registry.js'
export { createProjectionRegistry, ProjectionRegistry } from './registry.js'
export type {
  ProjectionChange,
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionInitContext,
  ProjectionKey,
  ProjectionMetrics,
  ProjectionSnapshot,
  SessionProjectionMap,
  SessionProjectionStateMap,
  SessionProjections,
  SessionProjectionUnit,
} from './types.js'
