import { isDshError } from '@dsh/context'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { existingRoot, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson, table } from '../output.js'

interface VerifyRow {
  readonly id: string
  /** `torn`: committed data is intact; an incomplete final batch follows (reads ignore it, `load` truncates it). */
  readonly status: 'ok' | 'torn' | 'corrupt' | 'error'
  readonly events?: number
  readonly tornBytes?: number
  readonly code?: string
  readonly message?: string
}

/**
 * Reads every committed log in full and reports torn tails and corruption,
 * including logs whose header is too damaged to list. Exits 1 when any log is
 * corrupt or unreadable (a torn tail alone is not an error). Never writes.
 */
export async function verifyCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh verify' takes no positional arguments.")
  const root = existingRoot(command.options)
  const persistence = createJsonlPersistence({ root })
  const rows: VerifyRow[] = []
  try {
    for (const record of await persistence.list()) {
      try {
        const report = await persistence.verify(record.header.id)
        rows.push({ id: record.header.id, status: report.tornBytes > 0 ? 'torn' : 'ok', events: report.events, tornBytes: report.tornBytes })
      } catch (error) {
        const corrupt = isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')
        rows.push({ id: record.header.id, status: corrupt ? 'corrupt' : 'error', code: isDshError(error) ? error.code : 'UNKNOWN', message: error instanceof Error ? error.message : String(error) })
      }
    }
    for (const damaged of persistence.damagedLogs()) {
      rows.push({ id: typeof damaged.id === 'string' ? damaged.id : damaged.dir, status: 'corrupt', code: damaged.code, message: damaged.message })
    }
  } finally {
    await persistence.close()
  }
  const count = (status: VerifyRow['status']): number => rows.filter((r) => r.status === status).length
  const bad = rows.filter((r) => r.status === 'corrupt' || r.status === 'error')
  if (command.options.json) {
    printJson({ root, checked: rows.length, ok: count('ok'), torn: count('torn'), corrupt: count('corrupt'), errors: count('error'), sessions: rows }, io.out)
  } else {
    io.out.write(table(['id', 'status', 'events / problem'], rows.map((r) => [r.id, r.status, describe(r)])) + '\n')
    io.out.write(bad.length === 0
      ? `All ${rows.length} logs verified${count('torn') > 0 ? ` (${count('torn')} with a torn tail that the next load truncates)` : ''}.\n`
      : `${bad.length} of ${rows.length} logs failed verification: ${bad.map((r) => r.id).join(', ')}\n`)
  }
  return bad.length === 0 ? 0 : 1
}

function describe(row: VerifyRow): string {
  if (row.status === 'ok') return `${row.events} events`
  if (row.status === 'torn') return `${row.events} events + ${row.tornBytes} bytes of torn tail`
  return `${row.code}: ${row.message}`
}
