import type { Services } from '@dsh/context'
import type { CommandIo, ParsedCommand } from '../command.js'
import { withReadHost } from '../host-access.js'
import { firstLine, printJson } from '../output.js'
import { safe } from '../terminal.js'

type ContextView = Awaited<ReturnType<Services['sessionContext']['contextOf']>>
type ViewMessage = ContextView['messages'][number]

/**
 * `dsh show --context <id>`: what the model sees now — the session's
 * `sessionContext` view (a compacted range is one `user` message holding its
 * summary, marked with the events it stands for). Read-only: a read-only
 * host folds it from the checkpoint cache and a ranged read of the events
 * after it; nothing is written or repaired. `--json` prints the view.
 * `limit` keeps only the last N messages (the newest context), in the text
 * and in the `--json` view alike; the header still counts them all.
 */
export async function showContext(id: string, limit: number | undefined, command: ParsedCommand, io: CommandIo): Promise<number> {
  const full = await withReadHost(command, (host) => host.ctx.require('sessionContext').contextOf(id), { sessionContext: true }, io)
  const total = full.messages.length
  const view = limit === undefined || limit >= total ? full : { ...full, messages: full.messages.slice(total - limit) }
  if (command.json) {
    printJson(view, io.out)
    return 0
  }
  const mark = view.compaction
  io.out.write(safe`context of ${id}: ${total} message(s) through event ${view.seq}`)
  if (mark !== null) io.out.write(safe`, compacted through event ${mark.to}`)
  if (view.compacting) io.out.write(' (a compaction is in progress)')
  if (view.messages.length < total) io.out.write(safe`; the last ${view.messages.length} shown (--limit)`)
  io.out.write('\n\n')
  for (const message of view.messages) io.out.write(`${line(message)}\n`)
  return 0
}

/** One message: its seq and role, a summary's marker, then each block in one short line (escaped). */
function line(message: ViewMessage): string {
  const head = safe`${String(message.seq).padStart(6)}  ${message.role.padEnd(9)}`
  const marker =
    message.summary === undefined
      ? ''
      : safe` [summary of events ${message.summary.from}..${message.summary.to - 1}${message.summary.model === undefined ? '' : ` by ${message.summary.model}`}]`
  const blocks = message.blocks.map((block) => safe`${firstLine(blockText(block as unknown as Record<string, unknown>))}`).join(' | ')
  return `${head}${marker} ${blocks}${message.synthetic === true ? ' (synthetic)' : ''}`
}

function blockText(block: Record<string, unknown>): string {
  switch (block.type) {
    case 'text':
      return String(block.text)
    case 'reasoning':
      return `(reasoning) ${String(block.text)}`
    case 'tool-call':
      return `call ${String(block.name)} ${JSON.stringify(block.input)}`
    case 'tool-result': {
      const content = Array.isArray(block.content) ? (block.content as Record<string, unknown>[]) : []
      return `${block.isError === true ? 'error' : 'result'} ${content.map(blockText).join(' ')}`
    }
    case 'notice':
      return `notice ${JSON.stringify(block.data)}`
    default: {
      const { type, ...fields } = block
      return `${String(type)} ${JSON.stringify(fields)}`
    }
  }
}
