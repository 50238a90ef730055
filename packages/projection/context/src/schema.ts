import type { ProjectionStateSchema } from '@dsh/session-projection'
import { z } from 'zod/mini'
import { FOLD_WARNINGS, type FoldWarning, type SessionContextState } from './types.js'

// zod/mini: a cold read checks a cached state against this schema without loading classic zod.

const seq = z.int().check(z.gte(-1))
const count = z.int().check(z.nonnegative())

/**
 * A block as the state keeps it: its fields were checked when it was read
 * from an event, and a checkpoint is parsed JSON, so only the tag is checked
 * here (a deep JSON check of every block cost as much as refolding the log).
 */
const storedBlock = z.looseObject({ type: z.string() })

const usage = z.strictObject({
  input: count,
  output: count,
  cacheRead: z.optional(count),
  cacheWrite: z.optional(count),
  reasoning: z.optional(count),
})

const mark = z.strictObject({
  seq: count,
  compactionId: z.optional(z.string()),
  from: count,
  to: count,
  provider: z.optional(z.string()),
  model: z.optional(z.string()),
})

const message = z.strictObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  blocks: z.array(storedBlock),
  seq: count,
  provider: z.optional(z.string()),
  model: z.optional(z.string()),
  summary: z.optional(mark),
  synthetic: z.optional(z.literal(true)),
})

const toolCall = z.strictObject({
  type: z.literal('tool-call'),
  id: z.string(),
  name: z.string(),
  input: z.json(),
  arguments: z.optional(z.string()),
})

/**
 * The unit's checkpoint schema. Cast: zod types an optional field's output
 * as `T | undefined`, which parsed JSON never holds (strict TS keeps optional
 * fields exact).
 */
export const sessionContextStateSchema = z.strictObject({
  seq,
  chunks: z.array(z.array(message)),
  open: z.nullable(
    z.strictObject({ seq: count, from: z.optional(count), text: z.string(), reasoning: z.string(), calls: z.array(toolCall) }),
  ),
  mirrors: z.array(z.string()),
  compactions: z.array(
    z.strictObject({
      seq: count,
      compactionId: z.nullable(z.string()),
      summary: z.nullable(z.strictObject({ mark, blocks: z.array(storedBlock), seqs: z.optional(z.array(count)) })),
    }),
  ),
  compaction: z.nullable(mark),
  step: z.nullable(
    z.strictObject({
      seq: count,
      provider: z.nullable(z.string()),
      model: z.nullable(z.string()),
      ended: z.boolean(),
      usage: z.optional(usage),
      finish: z.optional(z.enum(['stop', 'tool-calls', 'max-tokens', 'aborted', 'error'])),
    }),
  ),
  provider: z.nullable(z.string()),
  model: z.nullable(z.string()),
  warnings: z.strictObject(Object.fromEntries(FOLD_WARNINGS.map((w) => [w, count])) as Record<FoldWarning, typeof count>),
}) as unknown as ProjectionStateSchema<SessionContextState>
