import type { z } from 'zod/mini'
import type { continuableDescriptorSchema, oneShotDescriptorSchema, subagentToolFilterSchema } from './schemas.js'

export { DESCRIPTOR_COMPOSITION_KEYS, SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION } from './event-names.js'

/**
 * A logged descriptor, v2, key for key the one the harness parses persisted
 * descriptors with, so that a descriptor valid on one side is valid on the
 * other and every catalog agrees. A one-shot is `{ version, mode, provider,
 * label? }` (any string is a label, the empty one included); a continuable
 * has a mandatory label (it is how the parent addresses the child) plus the
 * composition a resume reapplies: `agentProvider`, `agentModel`, `persona`
 * and `toolFilter` (`allow` and/or `deny`, lists of tool names). A payload
 * is corrupt when its version is not 2, its mode is neither, a field has the
 * wrong type, a continuable has no label, or it has any key outside its
 * mode's list. Options dsh has and the harness does not (`model`,
 * `instructions`, `maxTurns`, `outputSchema`, and the composition fields on
 * a one-shot child) live in the `subagent/options` event instead.
 *
 * The rules are written twice: as zod/mini schemas (`schemas.ts`, which
 * `spawn` checks what it writes with and whose issues it quotes) and as
 * plain checks (`descriptor-checks.ts`, which the projection units fold
 * logged descriptors with, so a listing loads no zod); the tests hold the
 * plain checks to the schemas.
 */
export type SubagentOneShotDescriptor = z.output<typeof oneShotDescriptorSchema>
export type SubagentContinuableDescriptor = z.output<typeof continuableDescriptorSchema>
export type SubagentDescriptor = SubagentOneShotDescriptor | SubagentContinuableDescriptor
export type SubagentMode = SubagentDescriptor['mode']
export type SubagentToolFilter = z.output<typeof subagentToolFilterSchema>

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/descriptor': SubagentDescriptor
  }
}
