import { isDshError } from '@dsh/context'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { existingRoot, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson, table } from '../output.js'

interface VerifyRow {
  readonly id: string
  readonly status: 'ok' | 'corrupt' | 'error'
  readonly events?: number
  readonly code?: string
  readonly message?: string
}

/** Reads every committed log in full; exits 1 when any is corrupt or unreadable. Never writes. */
export async function verifyCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh verify' takes no positional arguments.")
  const root = existingRoot(command.options)
  const persistence = createJsonlPersistence({ root })
  const rows: VerifyRow[] = []
  try {
    for (const record of await persistence.list()) {
      try {
        const observation = await persistence.inspect(record.header.id)
        rows.push({ id: record.header.id, status: 'ok', events: observation.events.length })
      } catch (error) {
        const corrupt = isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')
        rows.push({ id: record.header.id, status: corrupt ? 'corrupt' : 'error', code: isDshError(error) ? error.code : 'UNKNOWN', message: error instanceof Error ? error.message : String(error) })
      }
    }
  } finally {
    await persistence.close()
  }
  const bad = rows.filter((r) => r.status !== 'ok')
  if (command.options.json) {
    printJson({ root, checked: rows.length, ok: rows.length - bad.length, corrupt: rows.filter((r) => r.status === 'corrupt').length, errors: rows.filter((r) => r.status === 'error').length, sessions: rows }, io.out)
  } else {
    io.out.write(table(['id', 'status', 'events / problem'], rows.map((r) => [r.id, r.status, r.status === 'ok' ? String(r.events) : `${r.code}: ${r.message}`])) + '\n')
    io.out.write(bad.length === 0 ? `All ${rows.length} logs verified.\n` : `${bad.length} of ${rows.length} logs failed verification: ${bad.map((r) => r.id).join(', ')}\n`)
  }
  return bad.length === 0 ? 0 : 1
}
