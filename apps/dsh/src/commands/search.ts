import type { SearchPageBody } from '@dsh/protocol'
import { wireEventSearch, wireSessionSearch } from '@dsh/protocol/bodies'
import { SEARCH_PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { type CommandIo, limitOption, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson, table } from '../output.js'
import { withQueryHost } from '../query-access.js'
import { safe } from '../terminal.js'

/**
 * Full-text search over sessions or events. Read-only: it needs an index that
 * exists (`dsh reindex` builds one). `--json` prints the protocol's
 * `SearchPageBody` (with its `kind`), the body of `GET /api/search`.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const text = command.args.join(' ').trim()
  if (text.length === 0) throw new CliError('CLI_USAGE', "'dsh search' needs the text to look for.")
  const limit = limitOption(command, SEARCH_PAGE_MAX_LIMIT)
  const cursor = command.string('cursor')
  const request = { text, ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) }
  await withQueryHost(
    command,
    async (host) => {
      const { query } = host
      if (query.searchEvents === undefined || query.searchSessions === undefined) {
        throw new CliError(
          'CLI_SEARCH_UNAVAILABLE',
          `The root ${host.root} has no query index, and read commands never build one. Run 'dsh reindex --root ${host.root}' once, then search again.`,
        )
      }
      if (command.flag('events')) {
        const page = await query.searchEvents(request)
        if (command.json) return printBody(wireEventSearch(page), io)
        io.out.write(
          `${table(
            ['session', 'seq', 'type', 'snippet'],
            page.hits.map((h) => [h.id, String(h.seq), h.type, h.snippet]),
          )}\n`,
        )
        io.out.write(safe`${page.hits.length} event(s)`)
        io.out.write(page.nextCursor === undefined ? '\n' : safe`; next page: --cursor ${page.nextCursor}\n`)
      } else {
        const page = await query.searchSessions(request)
        if (command.json) return printBody(wireSessionSearch(page), io)
        io.out.write(
          `${table(
            ['session', 'matches', 'origin', 'parent'],
            page.hits.map((h) => [
              h.record.header.id,
              String(h.matches),
              h.record.header.origin ?? '-',
              h.record.header.parentSession ?? '-',
            ]),
          )}\n`,
        )
        io.out.write(safe`${page.hits.length} session(s)`)
        io.out.write(page.nextCursor === undefined ? '\n' : safe`; next page: --cursor ${page.nextCursor}\n`)
      }
    },
    io,
  )
  return 0
}

function printBody(body: SearchPageBody, io: CommandIo): void {
  printJson(body, io.out)
}
