import type { AgentDefinitionSource } from './agent-definition.js'
import { createCloseAgentTool } from './close-agent.js'
import { ToolSubagentControlError } from './errors.js'
import { createHarnessInterruptAgentTool, createHarnessReportTool, createHarnessSendMessageTool } from './harness-control.js'
import { createHarnessSubagentTool } from './harness-subagent.js'
import { createInterruptAgentTool } from './interrupt-agent.js'
import { createListAgentsTool, type ListAgentsFormat } from './list-agents.js'
import { createReportTool } from './report.js'
import { createSendMessageTool } from './send-message.js'
import { createSubagentTool } from './subagent-tool.js'
import type { SubagentControl, SubagentControlTool } from './tool.js'
import { createWaitAgentsTool } from './wait-agents.js'

/** Every tool's name in the `dsh` dialect, in the order `subagentControlTools` returns them. */
export const SUBAGENT_CONTROL_TOOL_NAMES = [
  'subagent',
  'send_message',
  'wait_agents',
  'interrupt_agent',
  'close_agent',
  'report',
  'list_agents',
] as const
export type SubagentControlToolName = (typeof SUBAGENT_CONTROL_TOOL_NAMES)[number]

/** The `harness` dialect's tools, in order: no `wait_agents` or `close_agent` (results arrive as notices). */
export const HARNESS_CONTROL_TOOL_NAMES = [
  'subagent',
  'send_message',
  'interrupt_agent',
  'report',
  'list_agents',
] as const satisfies readonly SubagentControlToolName[]

/**
 * The form of the tools a model is given: `dsh` (ids as `id`, explicit modes,
 * `wait_agents`/`close_agent`) or `harness` (the shapes a model prompted for
 * the harness calls: `subagent {description, prompt, run_in_background?}`,
 * `send_message {subagent_id, message}`, `interrupt_agent {agent_id}`,
 * `report {output}`, `list_agents {scope?}`).
 */
export type SubagentControlDialect = 'dsh' | 'harness'
export const SUBAGENT_CONTROL_DIALECTS: readonly SubagentControlDialect[] = ['dsh', 'harness']

export interface SubagentControlToolsOptions {
  /** Default `dsh`. */
  readonly dialect?: SubagentControlDialect
  /**
   * Which tools to return: a list of names, or a predicate. Default: all of
   * the dialect's. E.g. a top-level agent may leave out `report` (it has no
   * parent), a leaf child may get only `report`.
   */
  readonly filter?: readonly SubagentControlToolName[] | ((name: SubagentControlToolName) => boolean)
  /** Written into the descriptor of every child `subagent` starts (default: the runtime's, its driver's name). */
  readonly provider?: string
  /** How `list_agents` renders (default `harness`, in either dialect; `table` lists one-shot children too). */
  readonly listAgentsFormat?: ListAgentsFormat
  /**
   * The agent definitions the `dsh` dialect's `subagent` starts with
   * `agent: <name>` (e.g. `agentDefinitions({ root, project })` from
   * `@dsh/agent-definitions`). The harness dialect's `subagent` has no
   * `agent` argument.
   */
  readonly agents?: AgentDefinitionSource
}

/**
 * The subagent control tools over one `subagents` service, for a runtime to
 * hand to its model (they fit `SubagentRuntimeOptions.tools`):
 * `subagentsPlugin({ driver, tools: (_agent, runtime) => subagentControlTools(runtime) })`.
 * Each tool's `execute(input, { agent, signal })` acts as `agent`. An unknown
 * dialect or list format, or an empty provider, is `TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS`.
 */
export function subagentControlTools(control: SubagentControl, options: SubagentControlToolsOptions = {}): SubagentControlTool[] {
  const dialect = options.dialect ?? 'dsh'
  if (!SUBAGENT_CONTROL_DIALECTS.includes(dialect)) {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS',
      `The control tools' dialect must be 'dsh' or 'harness', got ${JSON.stringify(dialect)}.`,
    )
  }
  if (options.provider !== undefined && (typeof options.provider !== 'string' || options.provider.length === 0)) {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS',
      `provider must be a non-empty string, got ${JSON.stringify(options.provider)}.`,
    )
  }
  if (options.listAgentsFormat !== undefined && options.listAgentsFormat !== 'harness' && options.listAgentsFormat !== 'table') {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS',
      `listAgentsFormat must be 'harness' or 'table', got ${JSON.stringify(options.listAgentsFormat)}.`,
    )
  }
  const provider = options.provider === undefined ? {} : { provider: options.provider }
  const listAgents = () =>
    createListAgentsTool(control, { format: options.listAgentsFormat ?? 'harness' }) as unknown as SubagentControlTool
  const filter = options.filter
  const keep = (name: SubagentControlToolName): boolean =>
    filter === undefined ? true : typeof filter === 'function' ? filter(name) : filter.includes(name)
  if (dialect === 'harness') {
    const harness: Record<(typeof HARNESS_CONTROL_TOOL_NAMES)[number], () => SubagentControlTool> = {
      subagent: () => createHarnessSubagentTool(control, provider),
      send_message: () => createHarnessSendMessageTool(control),
      interrupt_agent: () => createHarnessInterruptAgentTool(control),
      report: () => createHarnessReportTool(control),
      list_agents: listAgents,
    }
    return HARNESS_CONTROL_TOOL_NAMES.filter(keep).map((name) => harness[name]())
  }
  const all: Record<SubagentControlToolName, () => SubagentControlTool> = {
    subagent: () => createSubagentTool(control, { ...provider, ...(options.agents === undefined ? {} : { agents: options.agents }) }),
    send_message: () => createSendMessageTool(control),
    wait_agents: () => createWaitAgentsTool(control),
    interrupt_agent: () => createInterruptAgentTool(control),
    close_agent: () => createCloseAgentTool(control),
    report: () => createReportTool(control),
    list_agents: listAgents,
  }
  return SUBAGENT_CONTROL_TOOL_NAMES.filter(keep).map((name) => all[name]())
}
