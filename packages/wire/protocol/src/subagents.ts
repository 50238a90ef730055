import { z } from 'zod'
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
 * child) and the rung that decided it.
 */
export const subagentListRow = z.intersection(
  subagentListEntry,
  z.object({ parentId: sessionId, depth: z.number().int().min(1), rung: subagentListRung }),
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
