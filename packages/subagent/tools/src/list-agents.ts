import type { SessionId } from '@dsh/session'
import type { ExplainedSubagentEntry, SubagentListEntry } from '@dsh/subagent'
import { z } from 'zod'
import { ToolSubagentControlError } from './errors.js'

export const LIST_AGENTS_TOOL_NAME = 'list_agents'

/** Model-visible input: strict, so a misspelt key is an error rather than silently ignored. */
export const listAgentsInputSchema = z.strictObject({
  scope: z
    .enum(['children', 'descendants'])
    .exactOptional()
    .describe("'children' (default): your direct subagents. 'descendants': your whole subagent tree, depth-first."),
})

export type ListAgentsInput = z.output<typeof listAgentsInputSchema>

/** The JSON Schema handed to the model (draft 2020-12, as `z.toJSONSchema` emits it). */
export const listAgentsJsonSchema = z.toJSONSchema(listAgentsInputSchema)

export const listAgentsDescription = [
  'List the subagents you have spawned, one line each: id, status, mode and label.',
  "Status is 'running' (working now; '(N queued)' counts messages waiting for it), 'idle' (a continuable agent waiting for your next send_message) or 'ready' (a one-shot agent that has finished).",
  "Lines marked 'diagnostic' are subagents whose records are damaged or could not be read right now; an 'unavailable' one may list normally if you ask again.",
  "Pass scope 'descendants' to include the subagents of your subagents.",
].join(' ')

/** How list_agents presents a child to the model. */
export type ListAgentsStatus = 'running' | 'idle' | 'ready'

/** One structured row of the tool result. */
export type ListAgentsRow =
  | {
      readonly kind: 'child'
      readonly id: SessionId
      readonly status: ListAgentsStatus
      readonly mode: 'one-shot' | 'continuable'
      readonly label?: string
      readonly hasChildren: boolean
      readonly parentId: SessionId
      readonly depth: number
      /** Messages queued for it behind its running turn (present only when > 0). */
      readonly queued?: number
    }
  | {
      readonly kind: 'diagnostic'
      readonly id: SessionId
      readonly reason: 'corrupt' | 'unsupported' | 'unavailable'
      readonly parentId: SessionId
      readonly depth: number
    }

export interface ListAgentsResult {
  readonly text: string
  readonly rows: readonly ListAgentsRow[]
}

/** What list_agents needs: the `subagents` runtime (or anything that explains a catalog the same way). */
export interface SubagentCatalog {
  explainChildren(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]>
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]>
  /** Messages queued for a busy child in this process (no log read); absent means none are shown. */
  queuedCount?(childId: string): number
}

export interface ListAgentsExecuteContext {
  /** The calling agent: its session (or anything with its id). */
  readonly agent: { readonly id: string }
  readonly signal?: AbortSignal
}

export interface ListAgentsTool {
  readonly name: typeof LIST_AGENTS_TOOL_NAME
  readonly description: string
  readonly inputSchema: typeof listAgentsInputSchema
  readonly jsonSchema: typeof listAgentsJsonSchema
  execute(input: unknown, context: ListAgentsExecuteContext): Promise<ListAgentsResult>
}

/**
 * Status from the row: a live child is `running`; a settled continuable one
 * is `idle` (its parent may resume it); a settled one-shot is `ready` (it
 * has finished and its result can be read).
 */
export function statusOf(row: Extract<SubagentListEntry, { kind: 'child' }>): ListAgentsStatus {
  if (row.activity === 'running') return 'running'
  return row.mode === 'continuable' ? 'idle' : 'ready'
}

/** Parses untrusted tool input; a mismatch is `TOOL_SUBAGENT_CONTROL_INVALID_INPUT` with a readable message. */
export function parseListAgentsInput(input: unknown): ListAgentsInput {
  const parsed = listAgentsInputSchema.safeParse(input ?? {})
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues.map((issue) => {
    const where = issue.path.length > 0 ? issue.path.join('.') : 'input'
    return `${where}: ${issue.message}`
  })
  throw new ToolSubagentControlError(
    'TOOL_SUBAGENT_CONTROL_INVALID_INPUT',
    `list_agents input is invalid (${problems.join('; ')}). Expected {} or { "scope": "children" | "descendants" }.`,
    { details: { issues: parsed.error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })) } },
  )
}

export function toListAgentsRow(entry: ExplainedSubagentEntry, queued = 0): ListAgentsRow {
  const { row, parentId, depth } = entry
  if (row.kind === 'diagnostic') return Object.freeze({ kind: 'diagnostic', id: row.id, reason: row.reason, parentId, depth })
  return Object.freeze({
    kind: 'child',
    id: row.id,
    status: statusOf(row),
    mode: row.mode,
    ...(row.label === undefined ? {} : { label: row.label }),
    hasChildren: row.hasChildren,
    parentId,
    depth,
    ...(queued > 0 ? { queued } : {}),
  })
}

const DIAGNOSTIC_TEXT: Record<'corrupt' | 'unsupported' | 'unavailable', string> = {
  corrupt: 'corrupt (its record is damaged; it cannot be resumed)',
  unsupported: 'unsupported (written by a newer version)',
  unavailable: 'unavailable (could not be read just now; list again to retry)',
}

/**
 * One line per row, indented two spaces per level below the caller:
 * `<id>  <status>  <mode>  <label>[  +subagents]` or `<id>  diagnostic: <reason>`.
 */
export function renderListAgents(rows: readonly ListAgentsRow[]): string {
  if (rows.length === 0) return '(no subagents)'
  return rows
    .map((row) => {
      const indent = '  '.repeat(Math.max(0, row.depth - 1))
      if (row.kind === 'diagnostic') return `${indent}${row.id}  diagnostic: ${DIAGNOSTIC_TEXT[row.reason]}`
      const label = row.label === undefined ? '(no label)' : JSON.stringify(row.label)
      const status = row.queued === undefined ? row.status : `${row.status} (${row.queued} queued)`
      return `${indent}${row.id}  ${status}  ${row.mode}  ${label}${row.hasChildren ? '  +subagents' : ''}`
    })
    .join('\n')
}

/** The `list_agents` tool over a subagent catalog (normally the `subagents` service). */
export function createListAgentsTool(catalog: SubagentCatalog): ListAgentsTool {
  return Object.freeze({
    name: LIST_AGENTS_TOOL_NAME,
    description: listAgentsDescription,
    inputSchema: listAgentsInputSchema,
    jsonSchema: listAgentsJsonSchema,
    async execute(input: unknown, context: ListAgentsExecuteContext): Promise<ListAgentsResult> {
      const { scope = 'children' } = parseListAgentsInput(input)
      const agentId = context?.agent?.id
      if (typeof agentId !== 'string' || agentId.length === 0) {
        throw new ToolSubagentControlError(
          'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT',
          'list_agents needs the calling agent (context.agent with a non-empty id).',
        )
      }
      const entries =
        scope === 'descendants'
          ? await catalog.explainDescendants(agentId, context.signal)
          : await catalog.explainChildren(agentId, context.signal)
      const rows = Object.freeze(
        entries.map((entry) => toListAgentsRow(entry, entry.row.kind === 'child' ? (catalog.queuedCount?.(entry.row.id) ?? 0) : 0)),
      )
      return Object.freeze({ text: renderListAgents(rows), rows })
    },
  })
}
