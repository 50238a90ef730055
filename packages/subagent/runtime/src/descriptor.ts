import { z } from 'zod/mini'

// The schemas are zod/mini: a catalog listing checks cached rows against them
// without loading classic zod. Issues read in English (spawn errors quote them).
z.config(z.locales.en())

/** The event type of the subagent descriptor: the durable source of a child's mode and label. */
export const SUBAGENT_DESCRIPTOR_EVENT = 'subagent/descriptor'
export const SUBAGENT_DESCRIPTOR_VERSION = 2

/**
 * Which tools a child's driver is given: `allow` keeps only the named tools,
 * `deny` drops the named ones. At least one of the two must be present, and
 * nothing else.
 */
export const subagentToolFilterSchema = z
  .strictObject({
    allow: z.exactOptional(z.array(z.string())),
    deny: z.exactOptional(z.array(z.string())),
  })
  .check(z.refine((filter) => filter.allow !== undefined || filter.deny !== undefined, 'a tool filter declares allow and/or deny'))

/**
 * v2 one-shot: `{ version, mode, provider, label? }` and nothing else. Any
 * string is a label, the empty one included.
 */
const oneShotDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('one-shot'),
  provider: z.string(),
  label: z.exactOptional(z.string()),
})

/**
 * v2 continuable: the one-shot fields with a mandatory label (it is how the
 * parent addresses the child), plus the composition a resume reapplies:
 * `agentProvider`, `agentModel`, `persona` and `toolFilter`.
 */
const continuableDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('continuable'),
  provider: z.string(),
  label: z.string(),
  agentProvider: z.exactOptional(z.string()),
  agentModel: z.exactOptional(z.string()),
  persona: z.exactOptional(z.string()),
  toolFilter: z.exactOptional(subagentToolFilterSchema),
})

/**
 * The strict v2 schema, key for key the one the harness parses persisted
 * descriptors with, so that a descriptor valid on one side is valid on the
 * other and every catalog agrees. A payload is corrupt when its version is
 * not 2, its mode is neither, a field has the wrong type, a continuable has
 * no label, or it has any key outside its mode's list. Options dsh has and
 * the harness does not (`model`, `instructions`, `maxTurns`, `outputSchema`,
 * and the composition fields on a one-shot child) live in the
 * `subagent/options` event instead.
 *
 * Only the `subagent` and `subagentProfile` projection units interpret
 * logged descriptors with it; `spawn` uses it to check what it writes.
 */
export const subagentDescriptorSchema = z.discriminatedUnion('mode', [oneShotDescriptorSchema, continuableDescriptorSchema])

export type SubagentOneShotDescriptor = z.output<typeof oneShotDescriptorSchema>
export type SubagentContinuableDescriptor = z.output<typeof continuableDescriptorSchema>
export type SubagentDescriptor = z.output<typeof subagentDescriptorSchema>
export type SubagentMode = SubagentDescriptor['mode']
export type SubagentToolFilter = z.output<typeof subagentToolFilterSchema>

/** The composition fields a continuable descriptor carries (a one-shot child keeps them in its options). */
export const DESCRIPTOR_COMPOSITION_KEYS = ['agentProvider', 'agentModel', 'persona', 'toolFilter'] as const

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/descriptor': SubagentDescriptor
  }
}
