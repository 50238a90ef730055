import {
  cursorParam,
  idParam,
  nonNegativeInt,
  PAGE_MAX_LIMIT,
  PARAM_MAX_LENGTH,
  searchKind,
  searchRequest,
  subagentScope,
} from '@dsh/protocol'
import { z } from 'zod'

// Tool inputs, composed from the wire schemas of @dsh/protocol (the same
// bounds the HTTP API enforces). Strict: a misspelt key is an error, not a
// silently ignored filter.

const text = z.string().max(PARAM_MAX_LENGTH)
const pageLimit = z.number().int().min(1).max(PAGE_MAX_LIMIT)

export const listSessionsInput = z.strictObject({
  parentSession: idParam.optional().describe('Only sessions whose parent is this session id.'),
  origin: z.enum(['subagent']).optional().describe("'subagent': only sessions created as subagents."),
  cwd: text.optional().describe('Only sessions started in this working directory.'),
  limit: pageLimit.optional().describe(`Page size, 1..${PAGE_MAX_LIMIT}; without it every match is returned.`),
  cursor: cursorParam.optional().describe('nextCursor from the previous page of the same filter.'),
})

export const showSessionInput = z.strictObject({
  id: idParam.describe('The session id.'),
  before: nonNegativeInt.optional().describe('Events strictly before this seq (default: the end of the log).'),
  limit: pageLimit.optional().describe(`Events per page, 1..${PAGE_MAX_LIMIT}.`),
})

export const listAgentsInput = z.strictObject({
  id: idParam.describe('The parent session whose subagents to list.'),
  scope: subagentScope.optional().describe("'children' (default) or 'descendants' (the whole subagent tree, depth-first)."),
})

export const searchInput = searchRequest.extend({ kind: searchKind.optional().describe("'sessions' (default) or 'events'.") }).strict()

/** The acting session a control tool runs as (the MCP client has no session of its own). */
export const controlSessionField = idParam.describe(
  'The session that acts: the parent of the subagents this call starts, messages or lists.',
)
