import { resolve } from 'node:path'
import { exportV0 } from '@dsh/session-import-v0'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { CommandIo, ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { rootOf, withReadHost } from '../host-access.js'
import { holdAt, interruptedStatus, untilInterrupted } from '../interrupt.js'
import { printJson, table } from '../output.js'
import { overlapOf } from '../overlap.js'
import { safe } from '../terminal.js'

/**
 * `dsh export <id…> --to dsh-v0 <dir>`: sessions of the dsh root written back
 * in the harness's v0 format under <dir> (a round trip of `dsh import`).
 * Reads the dsh root read-only; never overwrites a log in <dir>. <dir> must
 * not overlap the dsh root (be it, lie inside it or hold it), compared as
 * given and through symlinks, as `import` compares them: v0 directories are
 * never written into the root, and the export can be imported back. SIGINT
 * (Ctrl-C) or SIGTERM cancels it: what it wrote under <dir> (its staging
 * directory, logs placed, directories it made) is removed, and the status
 * is 130 (143).
 *
 * `DSH_EXPORT_HOLD=<fifo>` holds the export before it reads its first
 * session (its staging directory made): it writes `held` into the FIFO,
 * then waits until something is written into it and closed. Tests use it to
 * interrupt an export midway, ordered by events instead of timing.
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
  const target = resolve(to)
  const root = rootOf(command)
  const overlap = overlapOf(target, root)
  if (overlap !== undefined) {
    const via = overlap.viaLinks ? safe` (through symlinks: ${overlap.realA} and ${overlap.realB})` : ''
    throw new CliError(
      'CLI_USAGE',
      safe`The export directory ${target} and the dsh root ${root} overlap${via}; export into a directory outside the root (nothing was written).`,
    )
  }
  const hold = io.env.DSH_EXPORT_HOLD
  const outcome = await untilInterrupted(io, safe`the export stops and what it wrote under ${resolve(to)} is removed`, (signal) =>
    withReadHost(
      command,
      (host) =>
        exportV0({
          ids,
          persistence: hold === undefined || hold === '' ? host.persistence : heldAtFirstRead(host.persistence, hold),
          to,
          packChunks: command.flag('pack-chunks'),
          compression: command.flag('plain') ? 'none' : 'zstd',
          signal,
        }),
      {},
      io,
    ),
  )
  if ('interrupted' in outcome) return interruptedStatus(outcome.interrupted)
  const result = outcome.done
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

/** `persistence` whose first `inspect` (the export's first session read) waits at the test's hold first. */
function heldAtFirstRead(persistence: SessionPersistence, fifo: string): SessionPersistence {
  let held = false
  return new Proxy(persistence, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target)
      if (typeof value !== 'function') return value
      if (key !== 'inspect') return value.bind(target)
      return async (...args: unknown[]) => {
        if (!held) {
          held = true
          await holdAt(fifo)
        }
        return value.apply(target, args)
      }
    },
  })
}
