import type { z } from 'zod/mini'
import type { SubagentDescriptor, SubagentMode } from './descriptor.js'
import { DESCRIPTOR_COMPOSITION_KEYS, SUBAGENT_OPTIONS_VERSION } from './event-names.js'
import type { subagentOptionsSchema, subagentSettingsSchema } from './schemas.js'

export { SUBAGENT_OPTIONS_EVENT, SUBAGENT_OPTIONS_VERSION } from './event-names.js'

/**
 * Every option a child may run with:
 *
 * - `agentProvider`, `agentModel`, `persona`, `toolFilter`: the composition a
 *   continuable descriptor carries; a one-shot descriptor has no room for
 *   them, so a one-shot child keeps them here.
 * - `outputSchema`: a JSON Schema the final message of a one-shot child must
 *   satisfy (the runtime checks it).
 * - `model`, `instructions`: settings a driver may honour.
 * - `maxTokens`, `maxCostUsd`, `maxWallMs`, `maxTurns`: the child's budget,
 *   which the runtime enforces (`budget.ts`).
 *
 * Strict: an unknown key or a field of the wrong type makes the whole record
 * invalid (it could be a newer writer's field this reader would misapply).
 * The zod/mini schemas are in `schemas.ts`, the plain checks the units fold
 * with in `descriptor-checks.ts`.
 */
export type SubagentSettings = z.output<typeof subagentSettingsSchema>
export type SubagentOptions = z.output<typeof subagentOptionsSchema>

/**
 * Where each setting of a spawn is written: on a continuable child the
 * composition fields go into the descriptor, everything else (and on a
 * one-shot child, everything) into the options event. `options` is
 * `undefined` when nothing is left for it.
 */
export function splitSettings(
  mode: SubagentMode,
  settings: SubagentSettings,
): { composition: Partial<Record<(typeof DESCRIPTOR_COMPOSITION_KEYS)[number], unknown>>; options: SubagentOptions | undefined } {
  const composition: Record<string, unknown> = {}
  const rest: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(settings)) {
    if (value === undefined) continue
    if (mode === 'continuable' && (DESCRIPTOR_COMPOSITION_KEYS as readonly string[]).includes(key)) composition[key] = value
    else rest[key] = value
  }
  const options = Object.keys(rest).length === 0 ? undefined : ({ version: SUBAGENT_OPTIONS_VERSION, ...rest } as SubagentOptions)
  return { composition, options }
}

/**
 * The settings a child runs with: its options, then the composition its
 * descriptor carries (the descriptor wins a field both name).
 */
export function mergeSettings(descriptor: SubagentDescriptor, options: SubagentOptions | undefined): SubagentSettings {
  const merged: Record<string, unknown> = {}
  if (options !== undefined) for (const [key, value] of Object.entries(options)) if (key !== 'version') merged[key] = value
  if (descriptor.mode === 'continuable') {
    for (const key of DESCRIPTOR_COMPOSITION_KEYS) if (descriptor[key] !== undefined) merged[key] = descriptor[key]
  }
  return Object.freeze(merged) as SubagentSettings
}

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/options': SubagentOptions
  }
}
