import type { ListedAgentDefinition } from '@dsh/agent-definitions'
import { wireAgentDefinitionList } from '@dsh/protocol/bodies'
import { childToolNames, commandAgentDefinitions } from '../agent-definitions-access.js'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { printJson, table } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh agents --definitions [--project DIR]`: the agent definitions the
 * `subagent` tool can start by name, one per name (a project's overrides
 * the root's). Every file of both directories is validated; one invalid file
 * fails the listing with its `AGENT_DEFINITION_INVALID` error naming the
 * file and line. Text is a table (every cell escaped); `--json` prints the
 * protocol's `agentDefinitionList`. A tool `dsh run` does not offer a child
 * is marked `(unknown)` in the table, and in either form a warning on stderr
 * names it, since starting that definition is refused. The provider is shown
 * as written: which one a run speaks is that run's `--provider`.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command, ' with --definitions')
  const definitions = commandAgentDefinitions(command)
  const listed = await definitions.list()
  warnUnknownTools(listed, io)
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
    toolsText(definition.tools),
    budgetText(definition),
    definition.description,
  ])
  io.out.write(`${table(['NAME', 'SCOPE', 'MODEL', 'TOOLS', 'BUDGETS', 'DESCRIPTION'], rows)}\n`)
  return 0
}

/**
 * The tools `dsh run` offers a child started from a definition (the `dsh`
 * dialect's control tools: only its `subagent` tool starts definitions).
 * A definition naming another cannot be started.
 */
const OFFERED: ReadonlySet<string> = new Set(childToolNames('dsh'))

/** A definition's tools, each one `dsh run` does not offer marked `(unknown)`. */
function toolsText(tools: readonly string[] | undefined): string {
  if (tools === undefined) return 'all'
  if (tools.length === 0) return 'none'
  return tools.map((tool) => (OFFERED.has(tool) ? tool : `${tool}(unknown)`)).join(',')
}

/** One stderr line per definition naming tools `dsh run` does not offer: starting it would be refused. */
function warnUnknownTools(listed: readonly ListedAgentDefinition[], io: CommandIo): void {
  for (const definition of listed) {
    const unknown = (definition.tools ?? []).filter((tool) => !OFFERED.has(tool))
    if (unknown.length === 0) continue
    io.err.write(
      safe`dsh: warning: ${definition.file}: tools names ${unknown.join(', ')}, which dsh run does not offer a subagent (it offers ${[...OFFERED].join(', ')}); starting '${definition.name}' is refused (AGENT_DEFINITION_UNSUPPORTED)\n`,
    )
  }
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
