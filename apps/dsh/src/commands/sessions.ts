import type { SessionListFilter } from '@dsh/session-query'
import { existingRoot, intOption, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { withHost } from '../open-host.js'
import { formatTime, printJson, table } from '../output.js'

export async function sessionsCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  const { options } = command
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh sessions' takes no positional arguments; filter with --parent, --origin, --cwd.")
  const limit = intOption(options.limit, 'limit')
  const filter: SessionListFilter = {
    ...(options.parent === undefined ? {} : { parentSession: options.parent }),
    ...(options.origin === undefined ? {} : { origin: options.origin as 'subagent' }),
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(limit === undefined ? {} : { limit }),
    ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
  }
  const page = await withHost(existingRoot(options), (host) => host.query.listSessions(filter))
  if (options.json) {
    printJson(page, io.out)
    return 0
  }
  io.out.write(table(
    ['id', 'created', 'origin', 'parent', 'depth', 'cut'],
    page.records.map((r) => [r.header.id, formatTime(r.header.createdAt), r.header.origin ?? '-', r.header.parentSession ?? '-', String(r.header.delegationDepth), String(r.inheritedEventCount)]),
  ) + '\n')
  io.out.write(`${page.records.length} session(s)${page.nextCursor === undefined ? '' : `; next page: --cursor ${page.nextCursor}`}\n`)
  return 0
}
