import { z } from 'zod'

/** The event type of the subagent descriptor: the child's first own event. */
export const SUBAGENT_DESCRIPTOR_EVENT = 'subagent/descriptor'
export const SUBAGENT_DESCRIPTOR_VERSION = 2

const provider = z.string().min(1)
const label = z.string().min(1)

/**
 * Which tools a child's driver is given: `allow` keeps only the named tools,
 * `deny` drops the named ones (the harness's `ToolRestriction`). At least one
 * of the two must be present.
 */
export const subagentToolFilterSchema = z
  .strictObject({
    allow: z.array(z.string().min(1)).exactOptional(),
    deny: z.array(z.string().min(1)).exactOptional(),
  })
  .refine((filter) => filter.allow !== undefined || filter.deny !== undefined, 'a tool filter declares allow and/or deny')

/** Any JSON object: an `outputSchema` is a JSON Schema document. */
const jsonSchemaObject = z.record(z.string(), z.json())

/**
 * The run capabilities a descriptor may carry, on either mode. Every field is
 * optional and strictly typed; a field of the wrong type makes the whole
 * descriptor corrupt, exactly like an unknown key.
 *
 * - `agentProvider`, `agentModel`, `persona`, `toolFilter`: the harness's
 *   continuable composition fields (its resume reapplies them); we accept
 *   them on one-shot children too.
 * - `outputSchema`: a JSON Schema the child's final message must satisfy
 *   (parsed as JSON); the runtime validates a one-shot child's result with it.
 * - `model`, `instructions`, `maxTurns`: dsh's own settings (a driver may honour them).
 */
const capabilityFields = {
  agentProvider: z.string().min(1).exactOptional(),
  agentModel: z.string().min(1).exactOptional(),
  persona: z.string().exactOptional(),
  toolFilter: subagentToolFilterSchema.exactOptional(),
  outputSchema: jsonSchemaObject.exactOptional(),
  model: z.string().min(1).exactOptional(),
  instructions: z.string().exactOptional(),
  maxTurns: z.int().positive().exactOptional(),
}

/**
 * v2 one-shot: runs once and finishes. Strict: an unknown key makes the whole
 * payload corrupt (it could be a newer writer's field we would misread).
 */
const oneShotDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('one-shot'),
  provider,
  label: label.exactOptional(),
  ...capabilityFields,
})

/** v2 continuable: resumable by its parent, so it must be addressable by a label. */
const continuableDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('continuable'),
  provider,
  label,
  ...capabilityFields,
})

/**
 * The strict v2 schema. What makes a descriptor corrupt does not move: the
 * version must be 2, the mode one of the two, the provider a non-empty string,
 * a continuable label a non-empty string, and no key outside the declared
 * ones. Only the `subagent` projection unit interprets logged descriptors with
 * it; the runtime uses it to validate what it is about to write.
 */
export const subagentDescriptorSchema = z.discriminatedUnion('mode', [oneShotDescriptorSchema, continuableDescriptorSchema])

export type SubagentOneShotDescriptor = z.output<typeof oneShotDescriptorSchema>
export type SubagentContinuableDescriptor = z.output<typeof continuableDescriptorSchema>
export type SubagentDescriptor = z.output<typeof subagentDescriptorSchema>
export type SubagentMode = SubagentDescriptor['mode']
export type SubagentToolFilter = z.output<typeof subagentToolFilterSchema>
/** The optional capabilities and settings a descriptor may carry. */
export type SubagentSettings = Omit<SubagentContinuableDescriptor, 'version' | 'mode' | 'provider' | 'label'>

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/descriptor': SubagentDescriptor
  }
}
