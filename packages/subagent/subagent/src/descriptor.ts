import { z } from 'zod'

/** The event type of the subagent descriptor: the child's first own event. */
export const SUBAGENT_DESCRIPTOR_EVENT = 'subagent/descriptor'
export const SUBAGENT_DESCRIPTOR_VERSION = 2

const provider = z.string().min(1)
const label = z.string().min(1)

/**
 * v2 one-shot: runs once and finishes. Strict: an unknown key makes the whole
 * payload corrupt (it could be a newer writer's field we would misread).
 */
const oneShotDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('one-shot'),
  provider,
  label: label.exactOptional(),
})

/** v2 continuable: resumable by its parent, so it must be addressable by a label. */
const continuableDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('continuable'),
  provider,
  label,
  /** Optional run settings a driver may honour. */
  model: z.string().min(1).exactOptional(),
  instructions: z.string().exactOptional(),
  maxTurns: z.int().positive().exactOptional(),
})

/**
 * The strict v2 schema. Only the `subagent` projection unit interprets logged
 * descriptors with it; the runtime uses it to validate what it is about to write.
 */
export const subagentDescriptorSchema = z.discriminatedUnion('mode', [oneShotDescriptorSchema, continuableDescriptorSchema])

export type SubagentOneShotDescriptor = z.output<typeof oneShotDescriptorSchema>
export type SubagentContinuableDescriptor = z.output<typeof continuableDescriptorSchema>
export type SubagentDescriptor = z.output<typeof subagentDescriptorSchema>
export type SubagentMode = SubagentDescriptor['mode']
/** The optional settings a continuable descriptor may carry. */
export type SubagentSettings = Omit<SubagentContinuableDescriptor, 'version' | 'mode' | 'provider' | 'label'>

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/descriptor': SubagentDescriptor
  }
}
