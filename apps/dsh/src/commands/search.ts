import { existingRoot, intOption, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { withHost } from '../open-host.js'
import { printJson, table } from '../output.js'

export async function searchCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  const text = command.args.join(' ').trim()
  if (text.length === 0) throw new CliError('CLI_USAGE', "'dsh search' needs the text to look for.")
  const limit = intOption(command.options.limit, 'limit')
  const request = { text, ...(limit === undefined ? {} : { limit }), ...(command.options.cursor === undefined ? {} : { cursor: command.options.cursor }) }
  await withHost(existingRoot(command.options), async (host) => {
    const { query } = host
    if (query.searchEvents === undefined || query.searchSessions === undefined) {
      throw new CliError('CLI_USAGE', 'This root is opened without a search index; search needs the SQLite query index.')
    }
    if (command.options.events) {
      const page = await query.searchEvents(request)
      if (command.options.json) return printJson(page, io.out)
      io.out.write(table(['session', 'seq', 'type', 'snippet'], page.hits.map((h) => [h.id, String(h.seq), h.type, h.snippet])) + '\n')
      io.out.write(`${page.hits.length} event(s)${page.nextCursor === undefined ? '' : `; next page: --cursor ${page.nextCursor}`}\n`)
    } else {
      const page = await query.searchSessions(request)
      if (command.options.json) return printJson(page, io.out)
      io.out.write(table(['session', 'matches', 'origin', 'parent'], page.hits.map((h) => [h.record.header.id, String(h.matches), h.record.header.origin ?? '-', h.record.header.parentSession ?? '-'])) + '\n')
      io.out.write(`${page.hits.length} session(s)${page.nextCursor === undefined ? '' : `; next page: --cursor ${page.nextCursor}`}\n`)
    }
  })
  return 0
}
