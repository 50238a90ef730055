// Units may declare their checkpoint schema with this zod; any schema with
// zod's `safeParse` fits (`ProjectionStateSchema`), `zod/mini`'s included.
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
  ProjectionStateSchema,
  SessionProjectionMap,
  SessionProjectionStateMap,
  SessionProjections,
  SessionProjectionUnit,
} from './types.js'
