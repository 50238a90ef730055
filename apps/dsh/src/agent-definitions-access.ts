import { resolve } from 'node:path'
import { type AgentDefinitions, agentDefinitions } from '@dsh/agent-definitions'
import {
  type AgentDefinitionSource,
  HARNESS_CONTROL_TOOL_NAMES,
  SUBAGENT_CONTROL_TOOL_NAMES,
  type SubagentControlDialect,
} from '@dsh/tool-subagent-control'
import { DEFAULT_ROOT, type ParsedCommand } from './command.js'

/**
 * The agent definitions a command reads: `<root>/.dsh/agents/`, where root
 * is the session root (`--root`, default `./.dsh`), and
 * `<project>/.dsh/agents/`, where project is `--project DIR` (default: the
 * current directory). A project definition overrides the root's of the same
 * name. Only commands that declare a `project` option take `--project`.
 */
export function commandAgentDefinitions(command: ParsedCommand, cwd: string = process.cwd()): AgentDefinitions {
  return agentDefinitions({ root: resolve(cwd, command.root ?? DEFAULT_ROOT), project: resolve(cwd, command.string('project') ?? '.') })
}

/**
 * `definitions` as the `subagent` tool's source, with what the children it
 * starts can get: a definition asking for another provider or another tool
 * is refused when it is started (`AGENT_DEFINITION_UNSUPPORTED`).
 */
export function offering(definitions: AgentDefinitions, offers: NonNullable<AgentDefinitionSource['offers']>): AgentDefinitionSource {
  return { get: (name, signal) => definitions.get(name, signal), offers }
}

/**
 * The tools a child of `dsh run` is offered in `dialect`: every control tool
 * of the dialect (the CLI gives children no other tools).
 */
export function childToolNames(dialect: SubagentControlDialect): readonly string[] {
  return dialect === 'harness' ? HARNESS_CONTROL_TOOL_NAMES : SUBAGENT_CONTROL_TOOL_NAMES
}
