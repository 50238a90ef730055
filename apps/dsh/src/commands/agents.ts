import { createListAgentsTool } from '@dsh/tool-subagent-control'
import { existingRoot, onePositional, type CommandIo, type ParsedCommand } from '../command.js'
import { withHost } from '../open-host.js'
import { printJson } from '../output.js'

/** A session's subagents, rendered exactly as the model-visible list_agents tool renders them. */
export async function agentsCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const scope = command.options.descendants ? 'descendants' : 'children'
  const result = await withHost(existingRoot(command.options), (host) =>
    createListAgentsTool(host.subagents).execute({ scope }, { agent: { id } }))
  if (command.options.json) printJson({ parent: id, scope, rows: result.rows }, io.out)
  else io.out.write(result.text + '\n')
  return 0
}
