import type { CompactionService } from '@dsh/compaction'
import { isDshError } from '@dsh/context'
import type { HistoryPageBody, SearchPageBody, SessionListPageBody, SubagentListBody } from '@dsh/protocol'
import { capHistoryPage, wireEventSearch, wireHistory, wireSessionList, wireSessionSearch, wireSubagentList } from '@dsh/protocol/bodies'
import { HISTORY_PAGE_MAX_BYTES } from '@dsh/protocol/limits'
import type { Session } from '@dsh/session'
import type { SessionQuery } from '@dsh/session-query'
import { type ListingSources, listedValues, type PriceTable } from '@dsh/session-stats'
import {
  type ListAgentsCatalog,
  type ListAgentsFormat,
  renderListAgents,
  renderListAgentsEntries,
  toListAgentsEntries,
  toListAgentsRow,
} from '@dsh/tool-subagent-control'
import { z } from 'zod'
import { McpError } from './errors.js'
import { positiveOption } from './options.js'
import { controlSessionField, listAgentsInput, listSessionsInput, searchInput, showSessionInput } from './schemas.js'
import { callSessionStats, callTreeCosts, sessionStatsDescription, sessionStatsInput } from './stats-tool.js'

/** A tool as this server offers it: a name, a description, the input's JSON Schema, and a call. */
export interface McpTool {
  readonly name: string
  readonly description: string
  readonly inputSchema: { readonly type: 'object'; readonly [key: string]: unknown }
  /** Resolves the structured result (an object) and, optionally, the text a client shows (default: the result as JSON); rejects with a typed error. */
  call(args: unknown, signal: AbortSignal): Promise<McpToolAnswer>
}

export interface McpToolAnswer {
  readonly result: Record<string, unknown>
  readonly text?: string
}

/** A subagent-control tool (the `@dsh/tool-subagent-control` shape; `SubagentTool` in `@dsh/subagent`). */
export interface ControlTool {
  readonly name: string
  readonly description: string
  readonly jsonSchema: object
  execute(input: unknown, context: { readonly agent: Session; readonly signal?: AbortSignal }): Promise<unknown>
}

/** Where tools find their services, at call time (a `Context` or a host fits). */
export interface McpServiceSource {
  get(name: 'sessionQuery'): SessionQuery | undefined
  get(name: 'subagents'): ListAgentsCatalog | undefined
  /** What `list_sessions` reads titles, tokens and cost from (live views, then the checkpoint cache; never a log). */
  get(name: 'sessions'): ListingSources['sessions']
  get(name: 'sessionProjections'): ListingSources['projections']
  get(name: 'sessionProjectionCache'): ListingSources['cache']
  /** What `compact_session` calls (control tools only; a host given a summarizer has it). */
  get(name: 'compaction'): CompactionService | undefined
}

/** Parses tool arguments; a mismatch is `MCP_INVALID_INPUT` naming each bad field. */
export function parseInput<T extends z.ZodType>(tool: string, schema: T, args: unknown): z.output<T> {
  const parsed = schema.safeParse(args ?? {})
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'input'}: ${issue.message}`)
  throw new McpError('MCP_INVALID_INPUT', `${tool}: invalid arguments (${problems.join('; ')}).`, {
    details: { issues: parsed.error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })) },
  })
}

function jsonSchemaOf(schema: z.ZodType): McpTool['inputSchema'] {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>
  return { ...rest, type: 'object' }
}

type Compact<T> = { [K in keyof T]: Exclude<T[K], undefined> }

/** Drops keys whose value is undefined (zod's optional output) for APIs with exact optional properties. */
function compact<T extends object>(value: T): Compact<T> {
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined)) as Compact<T>
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new McpError('MCP_SERVICE_UNAVAILABLE', `This server's host has no '${what}' service.`)
  return value
}

export interface ReadToolsOptions {
  /**
   * The text `list_agents` answers with: `table` (default: every child, with
   * mode and tree) or `harness` (the continuable children, as a model given
   * the harness-dialect tools reads its own `list_agents`).
   */
  readonly listAgentsFormat?: ListAgentsFormat
  /**
   * The price table `cost` is priced with: `list_sessions` entries,
   * `list_agents` rows and the `session_stats` report. Without one every
   * cost is null (and `list_agents` rows carry none), as the descriptions say.
   */
  readonly prices?: PriceTable
  /**
   * Bytes of events' JSON one `show_session` page holds at most (default
   * `HISTORY_PAGE_MAX_BYTES`, 16 MiB, the HTTP history routes' cap); the page
   * stops before the event that would pass it, and an event alone over it is
   * answered elided. A positive integer, else `MCP_INVALID_OPTIONS`.
   */
  readonly maxHistoryPageBytes?: number
}

const LIST_AGENTS_DESCRIPTION: Record<ListAgentsFormat, string> = {
  table:
    "A session's subagents, one line each: id, status (running, idle, ready), mode, label, or a diagnostic row for a damaged or unreadable child. scope 'descendants' walks the whole tree.",
  harness:
    "A session's continuable subagents as its model reads them with list_agents: `<id> [running|idle|ready] — <label>`, or a diagnostic line for a damaged or unreadable child. scope 'descendants' walks the whole tree and adds each one's parent and depth.",
}

/**
 * The read tools. Each answers (`structuredContent`) a wire body of
 * `@dsh/protocol`, built by `@dsh/protocol/bodies` like the HTTP API's and
 * `dsh … --json`'s: `list_sessions` a `SessionListPageBody` (`dsh sessions`,
 * `GET /api/sessions`), `show_session` a `HistoryPageBody` (`dsh show`),
 * `list_agents` a `SubagentListBody` (`dsh agents`, `GET /api/sessions/:id/subagents`),
 * `search` a `SearchPageBody` with its `kind` (`dsh search [--events]`, `GET /api/search`),
 * `session_stats` a `SessionStatsReportBody` (`dsh stats`, `GET /api/sessions/:id/stats`).
 */
export function readTools(services: McpServiceSource, options: ReadToolsOptions = {}): McpTool[] {
  const listAgentsFormat = options.listAgentsFormat ?? 'table'
  const prices = options.prices
  const maxHistoryPageBytes = positiveOption('maxHistoryPageBytes', options.maxHistoryPageBytes, HISTORY_PAGE_MAX_BYTES)
  const query = (): SessionQuery => need(services.get('sessionQuery'), 'sessionQuery')
  return [
    {
      name: 'list_sessions',
      description: `List the sessions in this dsh root, oldest first: header (id, createdAt, origin, parentSession, delegationDepth, cwd), inherited event count, title and tokens used (null until known; ${
        prices === undefined
          ? 'cost is null, the server has no price table'
          : "cost in USD under the server's price table, null when unknown"
      }). Filter by parent, origin or cwd; page with limit and cursor.`,
      inputSchema: jsonSchemaOf(listSessionsInput),
      async call(args, signal) {
        const input = parseInput('list_sessions', listSessionsInput, args)
        const page = await query().listSessions(compact(input), signal)
        const values = listedValues(
          page.records,
          {
            sessions: services.get('sessions'),
            projections: services.get('sessionProjections'),
            cache: services.get('sessionProjectionCache'),
          },
          prices,
        )
        const body: SessionListPageBody = wireSessionList(page, values)
        return { result: body }
      },
    },
    {
      name: 'show_session',
      description:
        "A page of one session's history, newest page first: its header, the total event count, the inherited (forked) prefix length and the events (seq, type, time, data). Page back with before = nextBefore.",
      inputSchema: jsonSchemaOf(showSessionInput),
      async call(args, signal) {
        const { id, ...request } = parseInput('show_session', showSessionInput, args)
        const page = await query().readHistory(id, compact(request), signal)
        const body: HistoryPageBody = capHistoryPage(wireHistory(page), maxHistoryPageBytes)
        return { result: body }
      },
    },
    {
      name: 'list_agents',
      description: `${LIST_AGENTS_DESCRIPTION[listAgentsFormat]}${
        prices === undefined ? '' : " Each row's cost is in USD under the server's price table (its own model calls; null when unknown)."
      }`,
      inputSchema: jsonSchemaOf(listAgentsInput),
      async call(args, signal) {
        const { id, scope = 'children' } = parseInput('list_agents', listAgentsInput, args)
        const catalog = need(services.get('subagents'), 'subagents')
        const entries = scope === 'descendants' ? await catalog.explainDescendants(id, signal) : await catalog.explainChildren(id, signal)
        const costs = prices === undefined || entries.length === 0 ? undefined : await callTreeCosts(catalog, id, scope, signal, prices)
        const priced =
          costs === undefined
            ? entries
            : entries.map((entry) => ({
                ...entry,
                ...(costs.get(entry.row.id) ?? { cost: null, costReason: 'stats-unavailable' as const }),
              }))
        const body: SubagentListBody = wireSubagentList(id, scope, priced)
        if (listAgentsFormat === 'harness')
          return { result: body, text: renderListAgentsEntries(toListAgentsEntries(entries, scope, catalog), scope) }
        // The table (with each row's cost on a priced server), with the messages queued for a busy child in this process.
        const text = renderListAgents(
          priced.map((entry) => toListAgentsRow(entry, entry.row.kind === 'child' ? (catalog.queuedCount?.(entry.row.id) ?? 0) : 0)),
        )
        return { result: body, text }
      },
    },
    {
      name: 'session_stats',
      description: sessionStatsDescription(prices !== undefined),
      inputSchema: jsonSchemaOf(sessionStatsInput),
      async call(args, signal) {
        const input = parseInput('session_stats', sessionStatsInput, args)
        const report = await callSessionStats(need(services.get('subagents'), 'subagents'), compact(input), signal, prices)
        return { result: report as unknown as Record<string, unknown> }
      },
    },
    {
      name: 'search',
      description:
        "Full-text search over every session's events. kind 'sessions' (default): matching sessions, best first, with match counts; kind 'events': matching events with a snippet (matched words in […]).",
      inputSchema: jsonSchemaOf(searchInput),
      async call(args, signal) {
        const { kind = 'sessions', ...request } = parseInput('search', searchInput, args)
        const backend = query()
        if (backend.searchEvents === undefined || backend.searchSessions === undefined)
          throw new McpError('MCP_SERVICE_UNAVAILABLE', 'This root is open without a search index; search needs the SQLite query index.')
        const body: SearchPageBody =
          kind === 'events'
            ? wireEventSearch(await backend.searchEvents(compact(request), signal))
            : wireSessionSearch(await backend.searchSessions(compact(request), signal))
        return { result: body }
      },
    },
  ]
}

/** Runs one call of control tool `tool` acting as `sessionId` (the server's limits wrap every call this way). */
export type ActingAs = <T>(tool: string, sessionId: string, signal: AbortSignal, call: () => Promise<T>) => Promise<T>

/**
 * The control tools, each taking one more argument than its model-visible
 * form: `session`, the session that acts (the MCP client has none of its own).
 * A tool whose name a read tool already has is left out (`list_agents`).
 * Each call runs through `actingAs` once its session is live.
 */
export function controlTools(
  tools: readonly ControlTool[],
  resolveAgent: (id: string, signal: AbortSignal) => Promise<Session>,
  taken: ReadonlySet<string>,
  actingAs: ActingAs = (_tool, _id, _signal, call) => call(),
): McpTool[] {
  return tools
    .filter((tool) => !taken.has(tool.name))
    .map((tool) => {
      const schema = tool.jsonSchema as { properties?: Record<string, unknown>; required?: string[] }
      const sessionSchema = jsonSchemaOf(z.object({ session: controlSessionField })).properties as Record<string, unknown>
      return {
        name: tool.name,
        description: `${tool.description} Runs as the session named by 'session'.`,
        inputSchema: {
          ...(tool.jsonSchema as Record<string, unknown>),
          $schema: undefined,
          type: 'object',
          properties: { ...sessionSchema, ...(schema.properties ?? {}) },
          required: ['session', ...(schema.required ?? [])],
        },
        async call(args, signal) {
          if (args === null || typeof args !== 'object' || Array.isArray(args)) {
            throw new McpError('MCP_INVALID_INPUT', `${tool.name}: arguments must be an object with 'session'.`)
          }
          const { session, ...rest } = args as Record<string, unknown>
          const id = parseInput(tool.name, z.object({ session: controlSessionField }), { session }).session
          const agent = await resolveAgent(id, signal)
          const answer = await actingAs(tool.name, id, signal, () => tool.execute(rest, { agent, signal }))
          const result =
            answer !== null && typeof answer === 'object' && !Array.isArray(answer)
              ? (answer as Record<string, unknown>)
              : { result: answer }
          return typeof result.text === 'string' ? { result, text: result.text } : { result }
        },
      } satisfies McpTool
    })
}

/** A failure as the client sees it: `{ code, message }`. */
export function failureOf(error: unknown): { code: string; message: string } {
  if (isDshError(error)) return { code: error.code, message: error.message }
  return { code: 'MCP_TOOL_FAILED', message: error instanceof Error ? error.message : String(error) }
}
