/** The event type of the subagent descriptor: the durable source of a child's mode and label. */
export const SUBAGENT_DESCRIPTOR_EVENT = 'subagent/descriptor'
export const SUBAGENT_DESCRIPTOR_VERSION = 2

/**
 * The event type of a child's run options: everything a child runs with that
 * its descriptor does not carry. `spawn` appends it right after the
 * descriptor, and only when there is something to record. It is not part of
 * the child's identity: a missing or malformed options event never changes a
 * catalog row, it only leaves the child without those options.
 */
export const SUBAGENT_OPTIONS_EVENT = 'subagent/options'
export const SUBAGENT_OPTIONS_VERSION = 1

/** The composition fields a continuable descriptor carries (a one-shot child keeps them in its options). */
export const DESCRIPTOR_COMPOSITION_KEYS = ['agentProvider', 'agentModel', 'persona', 'toolFilter'] as const
