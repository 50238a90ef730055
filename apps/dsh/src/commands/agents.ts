import type { SubagentListBody } from '@dsh/protocol'
import { wireSubagentList } from '@dsh/protocol/bodies'
import type { SessionId } from '@dsh/session'
import { renderListAgents, toListAgentsRow } from '@dsh/tool-subagent-control/table'
import { type CommandIo, onePositional, type ParsedCommand } from '../command.js'
import { withReadHost } from '../host-access.js'
import { printJson } from '../output.js'
import { escapeTerminal } from '../terminal.js'

/**
 * A session's subagents. Read-only. The text is the table the model-visible
 * list_agents tool renders, with each child's tokens and duration added (blank
 * when unknown); `--json` prints the protocol's `SubagentListBody`
 * (`{ parentId, scope, rows }`, each row with its depth, ladder rung, tokens
 * and durationMs), the body of `GET /api/sessions/:id/subagents` for the same
 * scope. Tokens come from the `sessionStats` unit and duration from the
 * runtime's timing unit, down the catalog's ladder: a child served from the
 * checkpoint cache takes them from the cache, and a miss there is blank,
 * never a log read. The table comes from the tools package's `/table` entry,
 * which builds none of the tools' input schemas: this command validates no
 * tool input.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.flag('definitions')) return (await import('./agent-definitions.js')).run(command, io)
  const id = onePositional(command, 'session id')
  const scope = command.flag('descendants') ? 'descendants' : 'children'
  const entries = await withReadHost(
    command,
    (host) => (scope === 'descendants' ? host.subagents.explainDescendants(id) : host.subagents.explainChildren(id)),
    {},
    io,
  )
  if (command.json) {
    const body: SubagentListBody = wireSubagentList(id, scope, entries)
    printJson(body, io.out)
    return 0
  }
  // Ids are escaped before rendering (a newline in an id cannot forge a row);
  // each rendered line is escaped again for labels (idempotent on escaped text).
  // A read-only host runs no child, so no message is queued for one.
  const rows = entries.map((entry) => toListAgentsRow(entry, 0, true))
  const text = renderListAgents(rows.map((row) => ({ ...row, id: escapeTerminal(row.id) as SessionId })))
  io.out.write(`${text.split('\n').map(escapeTerminal).join('\n')}\n`)
  return 0
}
