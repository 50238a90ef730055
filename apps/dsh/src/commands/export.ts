import { exportV0 } from '@dsh/session-import-v0'
import type { CommandIo, ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { withReadHost } from '../host-access.js'
import { printJson, table } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh export <id…> --to dsh-v0 <dir>`: sessions of the dsh root written back
 * in the harness's v0 format under <dir> (a round trip of `dsh import`).
 * Reads the dsh root read-only; never overwrites a log in <dir>.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const format = command.string('to')
  if (format !== 'dsh-v0') {
    throw new CliError(
      'CLI_USAGE',
      `'dsh export' writes the harness's v0 format only: pass --to dsh-v0${format === undefined ? '' : ` (got '${format}')`}.`,
    )
  }
  const ids = command.args.slice(0, -1)
  const to = command.args.at(-1)
  if (to === undefined || ids.length === 0)
    throw new CliError(
      'CLI_USAGE',
      "'dsh export' takes one or more session ids, then the directory to write: dsh export <id…> --to dsh-v0 <dir>.",
    )
  const result = await withReadHost(
    command,
    (host) =>
      exportV0({
        ids,
        persistence: host.persistence,
        to,
        packChunks: command.flag('pack-chunks'),
        compression: command.flag('plain') ? 'none' : 'zstd',
      }),
    {},
    io,
  )
  if (command.json) printJson(result, io.out)
  else {
    io.out.write(
      `${table(
        ['id', 'events', 'file'],
        result.sessions.map((s) => [s.id, String(s.events), s.path]),
      )}\n`,
    )
    io.out.write(safe`Exported ${result.sessions.length} sessions to ${result.to}.\n`)
  }
  return 0
}
