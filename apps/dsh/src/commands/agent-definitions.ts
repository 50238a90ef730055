import type { ListedAgentDefinition } from '@dsh/agent-definitions'
import { wireAgentDefinitionList } from '@dsh/protocol/bodies'
import { commandAgentDefinitions } from '../agent-definitions-access.js'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { printJson, table } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh agents --definitions [--project DIR]`: the agent definitions the
 * `subagent` tool can start by name, one per name (a project's overrides
 * the root's). Every file of both directories is validated; one invalid file
 * fails the listing with its `AGENT_DEFINITION_INVALID` error naming the
 * file and line. Text is a table (every cell escaped); `--json` prints the
 * protocol's `agentDefinitionList`.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command, ' with --definitions')
  const definitions = commandAgentDefinitions(command)
  const listed = await definitions.list()
  if (command.json) {
    printJson(wireAgentDefinitionList(definitions.directories, listed), io.out)
    return 0
  }
  if (listed.length === 0) {
    io.out.write(safe`No agent definitions in ${definitions.directories.map((d) => d.dir).join(' or ')}.\n`)
    return 0
  }
  const rows = listed.map((definition) => [
    definition.name,
    definition.overrides === undefined ? definition.scope : `${definition.scope} (overrides root)`,
    [definition.provider, definition.model].filter((part) => part !== undefined).join(' ') || '-',
    definition.tools === undefined ? 'all' : definition.tools.length === 0 ? 'none' : definition.tools.join(','),
    budgetText(definition),
    definition.description,
  ])
  io.out.write(`${table(['NAME', 'SCOPE', 'MODEL', 'TOOLS', 'BUDGETS', 'DESCRIPTION'], rows)}\n`)
  return 0
}

function budgetText(definition: ListedAgentDefinition): string {
  const budgets = definition.budgets ?? {}
  const parts = [
    budgets.maxTokens === undefined ? undefined : `${budgets.maxTokens} tokens`,
    budgets.maxCostUsd === undefined ? undefined : `$${budgets.maxCostUsd}`,
    budgets.maxWallMs === undefined ? undefined : `${budgets.maxWallMs} ms`,
    budgets.maxTurns === undefined ? undefined : `${budgets.maxTurns} turns`,
  ].filter((part) => part !== undefined)
  return parts.length === 0 ? '-' : parts.join(', ')
}
