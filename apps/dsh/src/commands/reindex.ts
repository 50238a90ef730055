import { rebuildIndex } from '@dsh/host'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { asCliRootError, rootOf } from '../host-access.js'
import { printJson } from '../output.js'
import { createProgress } from '../progress.js'
import { safe } from '../terminal.js'

/**
 * Rebuilds the derived query index of an existing root from its logs, with a
 * progress bar on a TTY. Never writes a log; refuses a directory that is not
 * a dsh root.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const progress = createProgress(command.json ? undefined : io.err)
  const started = Date.now()
  try {
    const report = await asCliRootError(() =>
      rebuildIndex({ root: rootOf(command), onProgress: (p) => progress.update(p.done, p.total, p.phase) }),
    )
    progress.done()
    const summary = { ...report, ms: Date.now() - started }
    if (command.json) printJson(summary, io.out)
    else
      io.out.write(
        safe`Reindexed ${report.root}: ${report.listed} sessions listed, ${report.read} logs read, ${report.corrupt} corrupt, ${report.failed} failed, in ${summary.ms} ms.\n`,
      )
    return 0
  } finally {
    progress.done()
  }
}
