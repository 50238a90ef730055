import { SubagentError } from './errors.js'
import type * as SchemaModule from './schemas.js'

/** `schemas.ts`: the zod/mini schemas of what spawn writes. */
export type SpawnSchemas = typeof SchemaModule

let loaded: SpawnSchemas | undefined
let loading: Promise<SpawnSchemas> | undefined

/**
 * Loads the spawn schemas once per process. They are a module of their own:
 * zod costs a short read command, such as a catalog listing, more than its
 * reads, and a listing needs none of them (the units fold with plain
 * checks). A writable runtime loads them when it is made ready, so `spawn`
 * (synchronous) can check its settings and descriptor.
 */
export function loadSpawnSchemas(): Promise<SpawnSchemas> {
  loading ??= import('./schemas.js').then((module) => {
    loaded = module
    return module
  })
  return loading
}

/** The spawn schemas for a spawn; a runtime that was never made ready has none yet. */
export function spawnSchemas(): SpawnSchemas {
  if (loaded !== undefined) return loaded
  throw new SubagentError(
    'SUBAGENT_INVALID_OPTIONS',
    'This runtime cannot check spawn settings yet: await runtime.ready() (subagentsPlugin does at activation) before spawning with settings.',
  )
}
