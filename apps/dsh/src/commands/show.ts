import type { HistoryPageBody } from '@dsh/protocol'
import { wireHistory } from '@dsh/protocol/bodies'
import { PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { type CommandIo, intOption, limitOption, onePositional, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { firstLine, formatTime, printJson } from '../output.js'
import { withQueryHost } from '../query-access.js'
import { safe } from '../terminal.js'

/**
 * A session's header and a page of history. Read-only. `--json` prints the
 * protocol's `HistoryPageBody`, the body of the history routes. `--context`
 * prints what the model sees now instead (see `showContext`); `--limit` and
 * `--before` are checked the same way for both, and `--before` (a log
 * position) does not apply to the context view.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const before = intOption(command, 'before')
  const limit = limitOption(command, PAGE_MAX_LIMIT)
  // The full host (units, cache) loads only for --context: a history page needs the query host alone.
  if (command.flag('context')) {
    if (before !== undefined)
      throw new CliError(
        'CLI_USAGE',
        '--before pages back through the log; --context shows the current view: use --limit N for its last N messages.',
      )
    return (await import('./show-context.js')).showContext(id, limit, command, io)
  }
  const page = await withQueryHost(
    command,
    (host) => host.query.readHistory(id, { ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }),
    io,
  )
  if (command.json) {
    const body: HistoryPageBody = wireHistory(page)
    printJson(body, io.out)
    return 0
  }
  const h = page.header
  io.out.write(safe`session ${h.id}\n  created ${formatTime(h.createdAt)}, depth ${h.delegationDepth}`)
  if (h.origin !== undefined) io.out.write(safe`, origin ${h.origin}`)
  if (h.parentSession !== undefined) io.out.write(safe`, parent ${h.parentSession}`)
  io.out.write(safe`\n  ${page.total} events, ${page.inheritedEventCount} inherited${h.isSeeded ? ' (seeded)' : ''}\n\n`)
  for (const event of page.events) {
    const own = event.seq >= page.inheritedEventCount ? ' ' : '^'
    io.out.write(safe`${own}${String(event.seq).padStart(6)}  ${event.type.padEnd(20)} ${firstLine(JSON.stringify(event.data) ?? '')}\n`)
  }
  if (page.nextBefore !== undefined) io.out.write(safe`\nearlier events: --before ${page.nextBefore}\n`)
  return 0
}
