import { existingRoot, intOption, onePositional, type CommandIo, type ParsedCommand } from '../command.js'
import { withHost } from '../open-host.js'
import { formatTime, printJson } from '../output.js'

export async function showCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const before = intOption(command.options.before, 'before')
  const limit = intOption(command.options.limit, 'limit')
  const page = await withHost(existingRoot(command.options), (host) =>
    host.query.readHistory(id, { ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }))
  if (command.options.json) {
    printJson(page, io.out)
    return 0
  }
  const h = page.header
  io.out.write(`session ${h.id}\n  created ${formatTime(h.createdAt)}, depth ${h.delegationDepth}${h.origin ? `, origin ${h.origin}` : ''}${h.parentSession ? `, parent ${h.parentSession}` : ''}\n`)
  io.out.write(`  ${page.total} events, ${page.inheritedEventCount} inherited${h.isSeeded ? ' (seeded)' : ''}\n\n`)
  for (const event of page.events) {
    const own = event.seq >= page.inheritedEventCount ? ' ' : '^'
    io.out.write(`${own}${String(event.seq).padStart(6)}  ${event.type.padEnd(20)} ${summarize(event.data)}\n`)
  }
  if (page.nextBefore !== undefined) io.out.write(`\nearlier events: --before ${page.nextBefore}\n`)
  return 0
}

function summarize(data: unknown): string {
  const text = JSON.stringify(data)
  return text.length > 100 ? `${text.slice(0, 97)}...` : text
}
