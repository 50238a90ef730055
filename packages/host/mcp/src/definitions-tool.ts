import type { AgentDefinitions, ListedAgentDefinition } from '@dsh/agent-definitions'
import { z } from 'zod'
import { type McpTool, parseInput } from './tools.js'

export const LIST_AGENT_DEFINITIONS_TOOL = 'list_agent_definitions'

export const listAgentDefinitionsInput = z.strictObject({})

export const LIST_AGENT_DEFINITIONS_DESCRIPTION =
  "The agent definitions the subagent tool can start by name (agent: <name>): each one's name, description, provider, model, tool allow-list, budgets and the file it was read from. A project's definition overrides the root's of the same name. An invalid definition file is an error naming the file and line."

/** What the tool reads (an `agentDefinitions({ root, project })` of `@dsh/agent-definitions` fits). */
export type AgentDefinitionListing = Pick<AgentDefinitions, 'directories' | 'list'>

/** One line per definition: `<name> (<scope>) — <description>`, then what it sets. */
function lineOf(definition: ListedAgentDefinition): string {
  const sets = [
    definition.provider === undefined && definition.model === undefined
      ? undefined
      : `model ${[definition.provider, definition.model].filter((part) => part !== undefined).join(' ')}`,
    definition.tools === undefined ? undefined : `tools ${definition.tools.length === 0 ? '(none)' : definition.tools.join(', ')}`,
    definition.budgets === undefined ? undefined : `budgets ${JSON.stringify(definition.budgets)}`,
  ].filter((part) => part !== undefined)
  const scope = definition.overrides === undefined ? definition.scope : `${definition.scope}, overrides root`
  return `${definition.name} (${scope}) — ${JSON.stringify(definition.description)}${sets.length === 0 ? '' : `; ${sets.join('; ')}`}`
}

/**
 * `list_agent_definitions`: every definition of the server's root and
 * project, validated whole on each call (files are read, never cached).
 * Answers `{ directories, definitions }`, the body `dsh agents --definitions
 * --json` prints; a bad file is its `AGENT_DEFINITION_INVALID` error.
 */
export function listAgentDefinitionsTool(definitions: AgentDefinitionListing): McpTool {
  const { $schema: _dialect, ...schema } = z.toJSONSchema(listAgentDefinitionsInput, { io: 'input' }) as Record<string, unknown>
  return {
    name: LIST_AGENT_DEFINITIONS_TOOL,
    description: LIST_AGENT_DEFINITIONS_DESCRIPTION,
    inputSchema: { ...schema, type: 'object' },
    async call(args, signal) {
      parseInput(LIST_AGENT_DEFINITIONS_TOOL, listAgentDefinitionsInput, args)
      const listed = await definitions.list(signal)
      const text =
        listed.length === 0
          ? `No agent definitions in ${definitions.directories.map((d) => d.dir).join(' or ')}.`
          : listed.map(lineOf).join('\n')
      return { result: { directories: definitions.directories, definitions: listed }, text }
    },
  }
}
