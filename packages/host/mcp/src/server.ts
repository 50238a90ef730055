import type { Session } from '@dsh/session'
import type { SubagentControl } from '@dsh/tool-subagent-control'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { compactSessionTool } from './compact-tool.js'
import { ControlLimiter, countChildren, type McpControlLimits } from './control-limits.js'
import { type AgentDefinitionListing, listAgentDefinitionsTool } from './definitions-tool.js'
import { McpError } from './errors.js'
import { type McpReadLimits, ReadTurns } from './read-turns.js'
import {
  type ControlTool,
  controlTools,
  failureOf,
  type McpServiceSource,
  type McpTool,
  type ReadToolsOptions,
  readTools,
} from './tools.js'

export const MCP_SERVER_NAME = 'dsh'

export interface McpServerOptions extends ReadToolsOptions {
  /**
   * Offer the subagent-control tools (start children, message, wait,
   * interrupt, close). Off by default: a client then only reads.
   */
  readonly allowControl?: boolean
  /** The `subagents` runtime the control tools drive; required with `allowControl`. */
  readonly control?: SubagentControl
  /**
   * Builds the control tools over the control this server hands it: `control`
   * with spawns and runs bounded by `limits` (e.g.
   * `(bounded) => subagentControlTools(bounded, { dialect })`); required with
   * `allowControl`. A tool named like a read tool (`list_agents`) is left
   * out: the read tool answers for any session.
   */
  readonly controlTools?: (control: SubagentControl) => readonly ControlTool[]
  /** Children per parent and runs at once the control tools may start (defaults in `@dsh/protocol/limits`). */
  readonly limits?: McpControlLimits
  /** Read-tool calls answered at once and waiting their turn (defaults `MCP_MAX_CONCURRENT_READS`, `MCP_MAX_WAITING_READS`). */
  readonly readLimits?: McpReadLimits
  /** Makes the acting session of a control call live (default: only sessions already live in `sessions`). */
  readonly resolveAgent?: (id: string, signal: AbortSignal) => Promise<Session>
  /** Reported in the initialize handshake. */
  readonly version?: string
  /** The agent definitions `list_agent_definitions` lists (a read tool, offered only when given). */
  readonly agentDefinitions?: AgentDefinitionListing
}

/**
 * A Model Context Protocol server over a dsh host's services. Read tools
 * always; control tools only with `allowControl`. Every failure — bad
 * arguments, an unknown session, a missing service — is a tool result with
 * `isError: true` and `structuredContent.error = { code, message }`; the
 * server itself never fails a call.
 */
export function createMcpServer(
  services: McpServiceSource & { get(name: 'sessions'): { get(id: string): Session | undefined } | undefined },
  options: McpServerOptions = {},
): Server {
  const reads = readTools(services, {
    ...(options.listAgentsFormat === undefined ? {} : { listAgentsFormat: options.listAgentsFormat }),
    ...(options.prices === undefined ? {} : { prices: options.prices }),
    ...(options.maxHistoryPageBytes === undefined ? {} : { maxHistoryPageBytes: options.maxHistoryPageBytes }),
  })
  if (options.agentDefinitions !== undefined) reads.push(listAgentDefinitionsTool(options.agentDefinitions))
  // Read calls take turns; control calls do not (a wait or a compaction lasts as long as its child or model, and must not stop the reads).
  const turns = new ReadTurns(options.readLimits)
  const tools = reads.map((tool): McpTool => ({ ...tool, call: (args, signal) => turns.run(signal, () => tool.call(args, signal)) }))
  if (options.allowControl === true) {
    if (options.control === undefined || options.controlTools === undefined) {
      throw new McpError(
        'MCP_SERVICE_UNAVAILABLE',
        'allowControl needs the runtime (options.control) and the control tools (options.controlTools).',
      )
    }
    const limiter = new ControlLimiter(options.control, options.limits ?? {}, (parentId, atMost, signal) => {
      const query = services.get('sessionQuery')
      if (query === undefined) throw new McpError('MCP_SERVICE_UNAVAILABLE', "This server's host has no 'sessionQuery' service.")
      return countChildren(query, parentId, atMost, signal)
    })
    const resolveAgent =
      options.resolveAgent ??
      (async (id: string) => {
        const live = services.get('sessions')?.get(id)
        if (live === undefined)
          throw new McpError('MCP_AGENT_UNAVAILABLE', `Session '${id}' is not live in this server; control tools act as a live session.`)
        return live
      })
    tools.push(
      ...controlTools(
        options.controlTools(limiter.control),
        resolveAgent,
        new Set(tools.map((tool) => tool.name)),
        (tool, id, signal, call) => limiter.within(tool, id, signal, call),
      ),
      compactSessionTool(() => services.get('compaction'), resolveAgent),
    )
  }
  const byName = new Map<string, McpTool>(tools.map((tool) => [tool.name, tool]))

  const server = new Server({ name: MCP_SERVER_NAME, version: options.version ?? '0.1.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema })),
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const tool = byName.get(request.params.name)
    try {
      if (tool === undefined) {
        const hint = options.allowControl === true ? '' : ' (control tools need --allow-control)'
        throw new McpError(
          'MCP_UNKNOWN_TOOL',
          `There is no tool '${request.params.name}'${hint}; list the tools to see what this server offers.`,
        )
      }
      const { result, text } = await tool.call(request.params.arguments ?? {}, extra.signal)
      return { content: [{ type: 'text', text: text ?? JSON.stringify(result, null, 2) }], structuredContent: result }
    } catch (error) {
      const failure = failureOf(error)
      return {
        isError: true,
        content: [{ type: 'text', text: `${failure.code}: ${failure.message}` }],
        structuredContent: { error: failure },
      }
    }
  })
  return server
}
