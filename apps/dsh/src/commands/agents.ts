import { escapeTerminal } from '@dsh/context'
import type { SubagentListBody } from '@dsh/protocol'
import { wireSubagentList } from '@dsh/protocol/bodies'
import type { SessionId } from '@dsh/session'
import { catalogListingCosts } from '@dsh/session-stats'
import { renderListAgents, toListAgentsRow } from '@dsh/tool-subagent-control/table'
import { type CommandIo, onePositional, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { withReadHost } from '../host-access.js'
import { printJson } from '../output.js'
import { priceTableOf } from '../prices.js'

/**
 * A session's subagents. Read-only. An unknown parent id is
 * `SUBAGENT_NOT_FOUND`, as in `dsh stats`. The text is the table the model-visible
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
 *
 * With a price table (`--prices FILE` or `DSH_PRICES`) each child also gets
 * its `cost`, priced as `dsh sessions` prices an entry and as the HTTP
 * catalog of a priced server does: its `sessionStats` read down the same
 * ladder as `dsh stats` (one body read for a cold child without a
 * checkpoint), no deeper than the rows go, `null` when unknown: the text
 * shows `$–` with the reason (`unknown-model`, `usage-not-recorded`,
 * `stats-unavailable`, …).
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.flag('definitions')) return (await import('./agent-definitions.js')).run(command, io)
  // --project says where definitions are read from; a session's subagents do not depend on it.
  if (command.string('project') !== undefined)
    throw new CliError(
      'CLI_USAGE',
      `--project is for 'dsh agents --definitions' (where agent definitions are read from); a session's subagents are listed without it: dsh agents <id>.`,
    )
  const id = onePositional(command, 'session id')
  const scope = command.flag('descendants') ? 'descendants' : 'children'
  const prices = await priceTableOf(command, io)
  const { entries, costs } = await withReadHost(
    command,
    async (host) => {
      const entries = await (scope === 'descendants' ? host.subagents.explainDescendants(id) : host.subagents.explainChildren(id))
      // No rows: the parent may not exist at all. Looking it up as `stats` does turns an unknown id into
      // SUBAGENT_NOT_FOUND (no projection is read); a parent that exists lists no subagents.
      if (entries.length === 0) await host.subagents.treeSnapshots(id, [], {})
      if (prices === undefined || entries.length === 0) return { entries, costs: undefined }
      return { entries, costs: await catalogListingCosts(host.subagents, id, scope, prices) }
    },
    {},
    io,
  )
  const priced =
    costs === undefined
      ? entries
      : entries.map((entry) => ({ ...entry, ...(costs.get(entry.row.id) ?? { cost: null, costReason: 'stats-unavailable' as const }) }))
  if (command.json) {
    const body: SubagentListBody = wireSubagentList(id, scope, priced)
    printJson(body, io.out)
    return 0
  }
  // Ids are escaped before rendering (a newline in an id cannot forge a row);
  // each rendered line is escaped again for labels (idempotent on escaped text).
  // A read-only host runs no child, so no message is queued for one.
  const rows = priced.map((entry) => toListAgentsRow(entry, 0, true))
  const text = renderListAgents(rows.map((row) => ({ ...row, id: escapeTerminal(row.id) as SessionId })))
  const lines = text.split('\n').map((line) => escapeTerminal(line))
  io.out.write(`${lines.join('\n')}\n`)
  return 0
}
