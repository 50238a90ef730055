import { SubagentError } from './errors.js'
import type * as OutputModule from './output.js'

/** `output.ts`: the `outputSchema` compiler and result check, the one part of the runtime that needs classic zod. */
export type OutputChecks = typeof OutputModule

let loaded: OutputChecks | undefined
let loading: Promise<OutputChecks> | undefined

/**
 * Loads the output checks once per process. They are a module of their own,
 * loaded on the spawn path only: classic zod (whose JSON Schema reader
 * compiles an `outputSchema`) costs a short read command, such as a catalog
 * listing, more than all of its reads. A writable runtime loads them when it
 * is activated, so `spawn` (synchronous) can check an `outputSchema` before
 * the child exists.
 */
export function loadOutputChecks(): Promise<OutputChecks> {
  loading ??= import('./output.js').then((module) => {
    loaded = module
    return module
  })
  return loading
}

/** The output checks, once loaded (`undefined` before). */
export function loadedOutputChecks(): OutputChecks | undefined {
  return loaded
}

/** The output checks for a spawn; a runtime that was never made ready has none yet. */
export function outputChecksForSpawn(): OutputChecks {
  if (loaded !== undefined) return loaded
  throw new SubagentError(
    'SUBAGENT_INVALID_OPTIONS',
    'This runtime cannot check an outputSchema yet: await runtime.ready() (subagentsPlugin does at activation) before spawning with one.',
  )
}
