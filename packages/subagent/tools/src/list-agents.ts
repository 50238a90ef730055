import type { SessionId } from '@dsh/session'
import type { ExplainedSubagentEntry, SubagentListEntry } from '@dsh/subagent'
import { z } from 'zod'
import { ToolSubagentControlError } from './errors.js'
import { type ListAgentsStatus, type ListAgentsTableResult, renderListAgents, toListAgentsRow } from './list-agents-table.js'
import { agentIdOf, parseToolInput } from './tool.js'

export const LIST_AGENTS_TOOL_NAME = 'list_agents'

/** Model-visible input: strict, so a misspelt key is an error rather than silently ignored. */
export const listAgentsInputSchema = z.strictObject({
  scope: z
    .enum(['children', 'descendants'])
    .exactOptional()
    .describe("'children' (default): your direct subagents. 'descendants': your whole subagent tree, depth-first."),
})

export type ListAgentsInput = z.output<typeof listAgentsInputSchema>
export type ListAgentsScope = NonNullable<ListAgentsInput['scope']>

/** The JSON Schema handed to the model (draft 2020-12, as `z.toJSONSchema` emits it). */
export const listAgentsJsonSchema = z.toJSONSchema(listAgentsInputSchema)

const EXPECTED = '{} or { "scope": "children" | "descendants" }'

/** What the model reads about `list_agents` (the default, `harness` format). */
export const listAgentsDescription = [
  'List the continuable subagents you started (the ones send_message can reach, and the ones you closed), one line each: id, status and label.',
  'You are told when one of them finishes, so do not call this to poll; call it to recall which subagents exist.',
  "Status: 'running' (working on a turn now), 'idle' (loaded and between turns; it may be waiting for subagents of its own), 'ready' (kept in storage only: not finished for good, a send_message starts its next turn in the same conversation) or 'closed' (closed with close_agent: finished for good, it takes no further message).",
  "A 'diagnostic' line is a subagent whose record is damaged or could not be read just now; it is listed rather than left out.",
  "Scope 'descendants' lists your whole tree below you, depth-first, each line with its direct parent and its depth: only depth-1 subagents take send_message, deeper ones can only be interrupted.",
  'The list is a snapshot; send_message itself decides whether a message can be delivered.',
].join(' ')

/** What the model reads about `list_agents` in the `table` format. */
export const listAgentsTableDescription = [
  'List the subagents you have spawned, one line each: id, status, mode and label.',
  "Status is 'running' (working now; '(N queued)' counts messages waiting for it), 'idle' (a continuable agent waiting for your next send_message), 'ready' (a one-shot agent that has finished) or 'closed' (a continuable agent closed with close_agent: it takes no further message).",
  "Lines marked 'diagnostic' are subagents whose records are damaged or could not be read right now; an 'unavailable' one may list normally if you ask again.",
  "Pass scope 'descendants' to include the subagents of your subagents.",
].join(' ')

/**
 * One entry of the default (`harness`) format: a continuable child with its
 * residency status and label, or a diagnostic. `parent` and `depth` are set
 * for the `descendants` scope only.
 */
export type ListAgentsEntry =
  | {
      readonly kind: 'child'
      readonly id: SessionId
      readonly label: string
      readonly status: ListAgentsStatus
      readonly parent?: SessionId
      readonly depth?: number
    }
  | {
      readonly kind: 'diagnostic'
      readonly id: SessionId
      readonly reason: 'corrupt' | 'unsupported' | 'unavailable'
      readonly parent?: SessionId
      readonly depth?: number
    }

/** What the default (`harness`) format of `list_agents` resolves. */
export interface ListAgentsResult {
  readonly text: string
  readonly entries: readonly ListAgentsEntry[]
}

/** How `list_agents` presents the catalog: `harness` (default) or `table` (what `dsh agents` prints). */
export type ListAgentsFormat = 'harness' | 'table'

export interface ListAgentsToolOptions {
  readonly format?: ListAgentsFormat
}

/** What list_agents needs: the `subagents` runtime (or anything that explains a catalog the same way). */
export interface ListAgentsCatalog {
  explainChildren(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]>
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]>
  /** Messages queued for a busy child in this process (no log read); absent means none are shown. */
  queuedCount?(childId: string): number
  /**
   * Whether this process is running a turn of `id` (or has input queued for
   * it). Absent: a live child counts as `running`, since nothing can tell a
   * turn in progress from a child loaded between turns.
   */
  isRunning?(id: string): boolean
}

export interface ListAgentsExecuteContext {
  /** The calling agent: its session (or anything with its id). */
  readonly agent: { readonly id: string }
  readonly signal?: AbortSignal
}

export interface ListAgentsTool<Result = ListAgentsResult> {
  readonly name: typeof LIST_AGENTS_TOOL_NAME
  readonly description: string
  readonly inputSchema: typeof listAgentsInputSchema
  readonly jsonSchema: typeof listAgentsJsonSchema
  execute(input: unknown, context: ListAgentsExecuteContext): Promise<Result>
}

/** Parses untrusted tool input; a mismatch is `TOOL_SUBAGENT_CONTROL_INVALID_INPUT` with a readable message. */
export function parseListAgentsInput(input: unknown): ListAgentsInput {
  return parseToolInput(LIST_AGENTS_TOOL_NAME, listAgentsInputSchema, input, EXPECTED)
}

/**
 * A child's residency: `closed` once it has been closed for good (`closed`
 * is the catalog entry's own, read beside its row), else `running` while
 * this process runs a turn of it (or holds input queued for it), `idle`
 * while its session is loaded between turns, `ready` when it exists only in
 * storage (resumable, not finished for good).
 */
export function residencyOf(
  row: Extract<SubagentListEntry, { kind: 'child' }>,
  catalog: Pick<ListAgentsCatalog, 'isRunning'>,
  closed = false,
): ListAgentsStatus {
  if (closed) return 'closed'
  if (catalog.isRunning?.(row.id) === true) return 'running'
  if (row.activity !== 'running') return 'ready'
  return catalog.isRunning === undefined ? 'running' : 'idle'
}

/**
 * The default format's entries: healthy continuable children (one-shot
 * children cannot take a message, so they are left out, though the walk
 * still reaches their descendants) and every diagnostic, whatever the
 * child's mode. `descendants` adds each entry's direct parent and depth.
 */
export function toListAgentsEntries(
  explained: readonly ExplainedSubagentEntry[],
  scope: ListAgentsScope,
  catalog: Pick<ListAgentsCatalog, 'isRunning'> = {},
): ListAgentsEntry[] {
  const entries: ListAgentsEntry[] = []
  for (const { row, parentId, depth, closed } of explained) {
    const at = scope === 'descendants' ? { parent: parentId, depth } : {}
    if (row.kind === 'diagnostic') entries.push(Object.freeze({ kind: 'diagnostic', id: row.id, reason: row.reason, ...at }))
    else if (row.mode === 'continuable')
      entries.push(
        Object.freeze({ kind: 'child', id: row.id, label: row.label, status: residencyOf(row, catalog, closed === true), ...at }),
      )
  }
  return entries
}

/**
 * The default format's text: `(no subagents)` when empty, else one line per
 * entry, `<id> [<status>] — <label>` or `<id> [diagnostic: <reason>]`; with
 * scope `descendants` each line carries ` parent=<id> depth=<n>` after the bracket.
 */
export function renderListAgentsEntries(entries: readonly ListAgentsEntry[], scope: ListAgentsScope): string {
  if (entries.length === 0) return '(no subagents)'
  return entries
    .map((entry) => {
      const at = scope === 'descendants' ? ` parent=${String(entry.parent)} depth=${String(entry.depth)}` : ''
      return entry.kind === 'child'
        ? `${entry.id} [${entry.status}]${at} — ${entry.label}`
        : `${entry.id} [diagnostic: ${entry.reason}]${at}`
    })
    .join('\n')
}

async function explain(catalog: ListAgentsCatalog, input: unknown, context: ListAgentsExecuteContext) {
  const { scope = 'children' } = parseListAgentsInput(input)
  const agentId = agentIdOf(LIST_AGENTS_TOOL_NAME, context)
  const explained =
    scope === 'descendants'
      ? await catalog.explainDescendants(agentId, context.signal)
      : await catalog.explainChildren(agentId, context.signal)
  return { scope, explained }
}

/**
 * The `list_agents` tool over a subagent catalog (normally the `subagents`
 * service). Default format `harness`: continuable children with their
 * residency; `{ format: 'table' }`: every child with mode, tree and queue.
 */
export function createListAgentsTool(
  catalog: ListAgentsCatalog,
  options?: { readonly format?: 'harness' },
): ListAgentsTool<ListAgentsResult>
export function createListAgentsTool(
  catalog: ListAgentsCatalog,
  options: { readonly format: 'table' },
): ListAgentsTool<ListAgentsTableResult>
export function createListAgentsTool(
  catalog: ListAgentsCatalog,
  options?: ListAgentsToolOptions,
): ListAgentsTool<ListAgentsResult> | ListAgentsTool<ListAgentsTableResult>
export function createListAgentsTool(
  catalog: ListAgentsCatalog,
  options: ListAgentsToolOptions = {},
): ListAgentsTool<ListAgentsResult> | ListAgentsTool<ListAgentsTableResult> {
  const format = options.format ?? 'harness'
  const common = {
    name: LIST_AGENTS_TOOL_NAME,
    inputSchema: listAgentsInputSchema,
    jsonSchema: listAgentsJsonSchema,
  } as const
  if (format === 'table') {
    return Object.freeze({
      ...common,
      description: listAgentsTableDescription,
      async execute(input: unknown, context: ListAgentsExecuteContext): Promise<ListAgentsTableResult> {
        const { explained } = await explain(catalog, input, context)
        const rows = Object.freeze(
          explained.map((entry) => toListAgentsRow(entry, entry.row.kind === 'child' ? (catalog.queuedCount?.(entry.row.id) ?? 0) : 0)),
        )
        return Object.freeze({ text: renderListAgents(rows), rows })
      },
    })
  }
  if (format !== 'harness') {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS',
      `list_agents format must be 'harness' or 'table', got ${JSON.stringify(format)}.`,
    )
  }
  return Object.freeze({
    ...common,
    description: listAgentsDescription,
    async execute(input: unknown, context: ListAgentsExecuteContext): Promise<ListAgentsResult> {
      const { scope, explained } = await explain(catalog, input, context)
      const entries = Object.freeze(toListAgentsEntries(explained, scope, catalog))
      return Object.freeze({ text: renderListAgentsEntries(entries, scope), entries })
    },
  })
}
