import { createCloseAgentTool } from './close-agent.js'
import { createInterruptAgentTool } from './interrupt-agent.js'
import { createListAgentsTool } from './list-agents.js'
import { createReportTool } from './report.js'
import { createSendMessageTool } from './send-message.js'
import { createSubagentTool } from './subagent-tool.js'
import type { SubagentControl, SubagentControlTool } from './tool.js'
import { createWaitAgentsTool } from './wait-agents.js'

/** Every tool's name, in the order `subagentControlTools` returns them. */
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

export interface SubagentControlToolsOptions {
  /**
   * Which tools to return: a list of names, or a predicate. Default: all.
   * E.g. a top-level agent may leave out `report` (it has no parent), a leaf
   * child may get only `report`.
   */
  readonly filter?: readonly SubagentControlToolName[] | ((name: SubagentControlToolName) => boolean)
}

/**
 * All the subagent control tools over one `subagents` service, for a runtime
 * to hand to its model (they fit `SubagentRuntimeOptions.tools`):
 * `subagentsPlugin({ driver, tools: (_agent, runtime) => subagentControlTools(runtime) })`.
 * Each tool's `execute(input, { agent, signal })` acts as `agent`.
 */
export function subagentControlTools(control: SubagentControl, options: SubagentControlToolsOptions = {}): SubagentControlTool[] {
  const filter = options.filter
  const keep = (name: SubagentControlToolName): boolean =>
    filter === undefined ? true : typeof filter === 'function' ? filter(name) : filter.includes(name)
  const all: Record<SubagentControlToolName, () => SubagentControlTool> = {
    subagent: () => createSubagentTool(control),
    send_message: () => createSendMessageTool(control),
    wait_agents: () => createWaitAgentsTool(control),
    interrupt_agent: () => createInterruptAgentTool(control),
    close_agent: () => createCloseAgentTool(control),
    report: () => createReportTool(control),
    list_agents: () => createListAgentsTool(control) as unknown as SubagentControlTool,
  }
  return SUBAGENT_CONTROL_TOOL_NAMES.filter(keep).map((name) => all[name]())
}
