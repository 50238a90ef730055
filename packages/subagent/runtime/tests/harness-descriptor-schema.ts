import { z } from 'zod'

/**
 * The harness's acceptance of a persisted `subagent/descriptor` payload,
 * written as a zod schema from its published parser (descriptor.ts of its
 * subagent package): an object whose `version` is the number 2; `mode`
 * one-shot or continuable; only that mode's keys (one-shot: version, mode,
 * provider, label; continuable adds agentProvider, agentModel, persona,
 * toolFilter); `provider` a string; a one-shot `label` an optional string,
 * a continuable one a string; the composition fields optional strings;
 * `toolFilter` an object with only `allow`/`deny`, each an array of strings,
 * at least one present. Any string passes, the empty one included. It is an
 * independent oracle for tests: the package's own schema is not used here.
 */
const toolFilter = z
  .object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() })
  .strict()
  .refine((value) => value.allow !== undefined || value.deny !== undefined)

export const harnessDescriptorChecker = z.union([
  z.object({ version: z.literal(2), mode: z.literal('one-shot'), provider: z.string(), label: z.string().optional() }).strict(),
  z
    .object({
      version: z.literal(2),
      mode: z.literal('continuable'),
      provider: z.string(),
      label: z.string(),
      agentProvider: z.string().optional(),
      agentModel: z.string().optional(),
      persona: z.string().optional(),
      toolFilter: toolFilter.optional(),
    })
    .strict(),
])

/** True when the harness would accept `payload` as a current (v2) descriptor. */
export function harnessAccepts(payload: unknown): boolean {
  // `undefined` values never reach a log (JSON drops them); a present key must hold its type.
  return harnessDescriptorChecker.safeParse(payload).success && !hasUndefined(payload)
}

function hasUndefined(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false
  return Object.values(value).some((item) => item === undefined || hasUndefined(item))
}
