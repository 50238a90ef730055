import type { SessionListPageBody } from '@dsh/protocol'
import { wireSessionList } from '@dsh/protocol/bodies'
import type { SessionListFilter } from '@dsh/session-query'
import { type CommandIo, intOption, noPositionals, type ParsedCommand } from '../command.js'
import { formatTime, printJson, table } from '../output.js'
import { withQueryHost } from '../query-access.js'
import { safe } from '../terminal.js'

/**
 * The live-preferred session list. Read-only: an existing root, nothing
 * created. `--json` prints the protocol's `SessionListPageBody`, the body of
 * `GET /api/sessions` for the same filter.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command, '; filter with --parent, --origin, --cwd')
  const limit = intOption(command, 'limit')
  const parent = command.string('parent')
  const origin = command.string('origin')
  const cwd = command.string('cwd')
  const cursor = command.string('cursor')
  const filter: SessionListFilter = {
    ...(parent === undefined ? {} : { parentSession: parent }),
    ...(origin === undefined ? {} : { origin: origin as 'subagent' }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(limit === undefined ? {} : { limit }),
    ...(cursor === undefined ? {} : { cursor }),
  }
  const page = await withQueryHost(command, (host) => host.query.listSessions(filter), io)
  if (command.json) {
    const body: SessionListPageBody = wireSessionList(page)
    printJson(body, io.out)
    return 0
  }
  io.out.write(
    `${table(
      ['id', 'created', 'origin', 'parent', 'depth', 'cut'],
      page.records.map((r) => [
        r.header.id,
        formatTime(r.header.createdAt),
        r.header.origin ?? '-',
        r.header.parentSession ?? '-',
        String(r.header.delegationDepth),
        String(r.inheritedEventCount),
      ]),
    )}\n`,
  )
  io.out.write(safe`${page.records.length} session(s)`)
  io.out.write(page.nextCursor === undefined ? '\n' : safe`; next page: --cursor ${page.nextCursor}\n`)
  return 0
}
