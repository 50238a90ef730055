import { z } from 'zod'
import { listingCostReason } from './cost-reasons.js'
import { choiceParam, sessionId } from './primitives.js'

const childBase = {
  kind: z.literal('child'),
  id: sessionId,
  activity: z.enum(['running', 'inactive']),
  hasChildren: z.boolean(),
}

/**
 * One row of a parent's subagent catalog (`SubagentListEntry` of the
 * subagent design). A child carries the strong mode/label contract (a
 * continuable child always has a label); a diagnostic names a child whose
 * identity could not be computed. `unsupported` is part of the enum, as in the
 * design's type, but the dsh listing never produces it (missing, corrupt and
 * unknown-version descriptors are all `corrupt`).
 */
export const subagentListEntry = z.union([
  z.object({ ...childBase, mode: z.literal('one-shot'), label: z.string().optional() }),
  z.object({ ...childBase, mode: z.literal('continuable'), label: z.string() }),
  z.object({ kind: z.literal('diagnostic'), id: sessionId, reason: z.enum(['corrupt', 'unsupported', 'unavailable']) }),
])

/** Which rung of the projection ladder decided a row: 1 live watermark, 2 checkpoint cache, 3 one cold read + fold. */
export const subagentListRung = z.union([z.literal(1), z.literal(2), z.literal(3)])

/**
 * A catalog row on the wire: the entry plus where it sits in the tree
 * (`parentId` is the session whose catalog holds it, `depth` is 1 for a direct
 * child), the rung that decided it and the child's usage: `tokens` (all of its
 * own model calls' tokens), `durationMs` (its own settled turns) and
 * `startedAt`/`endedAt` (epoch ms of its descriptor and of its latest turn
 * start or end), read down the same ladder as the row and `null` when unknown
 * (not cached, no such unit, a diagnostic row), and, from a priced server,
 * its `cost`. dsh's catalog surfaces (HTTP, MCP, `dsh agents --json`) always
 * send the usage; it is beyond the subagent design's row, so a row without it
 * still parses.
 */
export const subagentListRow = z.intersection(
  subagentListEntry,
  z.object({
    parentId: sessionId,
    depth: z.number().int().min(1),
    rung: subagentListRung,
    tokens: z.number().int().min(0).nullable().optional(),
    durationMs: z.number().min(0).nullable().optional(),
    startedAt: z.number().nullable().optional(),
    endedAt: z.number().nullable().optional(),
    /**
     * USD of the child's own model calls under the server's price table,
     * priced as a listing entry's `cost`: `null` when its usage is unknown or
     * a model it used has no price (never 0 in its place). Sent with a price
     * table only: by the HTTP catalog of a priced server and by `dsh agents
     * --prices`.
     */
    cost: z.number().nonnegative().nullable().optional(),
    /** Why `cost` is `null`, when the pricer knows (sent only beside a null cost). */
    costReason: listingCostReason.optional(),
    /** The child was closed (it takes no further input), read with its usage; `null` when unknown (always on a diagnostic). */
    closed: z.boolean().nullable().optional(),
  }),
)

export const subagentScope = z.enum(['children', 'descendants'])

/** The catalog of `parentId`: direct children, or the whole subtree in pre-order. */
export const subagentList = z.object({
  parentId: sessionId,
  scope: subagentScope,
  rows: z.array(subagentListRow),
})

/** Query parameters of `GET /api/sessions/:id/subagents`. */
export const subagentsQuery = z.object({
  scope: choiceParam(['children', 'descendants']).optional(),
})
