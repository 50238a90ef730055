import { z } from 'zod'
import { intParam, nonNegativeInt, sessionId } from './primitives.js'

/** The largest `keep` a compaction request may ask for (the newest context messages left verbatim). */
export const COMPACT_MAX_KEEP = 10_000

/** `keep` of `POST /api/sessions/:id/compact`: how many of the newest context messages stay verbatim (the host's default, 4, when absent). */
export const compactQuery = z.object({ keep: intParam(0, COMPACT_MAX_KEEP).optional() })

/**
 * The answer to a compaction: the summary replaced the context messages of
 * events `[from, to)` in what the model sees next; the log keeps every event.
 * Token counts are the host's estimate (characters / 4).
 */
export const compactionResult = z.object({
  id: sessionId,
  compactionId: z.string().min(1),
  from: nonNegativeInt,
  to: nonNegativeInt,
  /** How many context messages the summary replaced. */
  shadowed: nonNegativeInt,
  tokensBefore: nonNegativeInt,
  tokensAfter: nonNegativeInt,
})
