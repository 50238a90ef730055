import type { SessionId } from '@dsh/session'
import { createListAgentsTool, renderListAgents } from '@dsh/tool-subagent-control'
import { type CommandIo, onePositional, type ParsedCommand } from '../command.js'
import { withReadHost } from '../host-access.js'
import { printJson } from '../output.js'
import { escapeTerminal } from '../terminal.js'

/** A session's subagents, rendered as the model-visible list_agents tool renders them. Read-only. */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const scope = command.flag('descendants') ? 'descendants' : 'children'
  const result = await withReadHost(command, (host) => createListAgentsTool(host.subagents).execute({ scope }, { agent: { id } }), {}, io)
  if (command.json) {
    printJson({ parent: id, scope, rows: result.rows }, io.out)
    return 0
  }
  // Ids are escaped before rendering (a newline in an id cannot forge a row);
  // each rendered line is escaped again for labels (idempotent on escaped text).
  const text = renderListAgents(result.rows.map((row) => ({ ...row, id: escapeTerminal(row.id) as SessionId })))
  io.out.write(`${text.split('\n').map(escapeTerminal).join('\n')}\n`)
  return 0
}
