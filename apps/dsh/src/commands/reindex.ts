import { rebuildIndex } from '@dsh/host'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { asCliRootError, rootOf } from '../host-access.js'
import { holdAt, interruptedStatus, untilInterrupted } from '../interrupt.js'
import { logLessSessions } from '../log-less-dirs.js'
import { printJson } from '../output.js'
import { createProgress } from '../progress.js'
import { safe } from '../terminal.js'

/**
 * Rebuilds the derived query index of an existing root from its logs, with a
 * progress bar on a TTY: into a new file, swapped in when complete, so every
 * other command keeps answering from the old index meanwhile, and a rebuild
 * that fails leaves it as it was. Never writes a log; refuses a directory
 * that is not a dsh root. A session directory without a log (removed outside
 * dsh) is not indexed, and is reported (`missing`, and one warning each on
 * stderr) rather than dropped without a word; `dsh verify` names it too. SIGINT (Ctrl-C) or SIGTERM cancels the rebuild:
 * its new file is removed, the old index stays, and the status is 130 (143).
 *
 * `DSH_REINDEX_HOLD=<fifo>` holds the rebuild between the two (the new file
 * complete, the old one still in place): it writes `held` into the FIFO,
 * then waits until something is written into it and closed. Tests use it to
 * run commands during a rebuild, ordered by events instead of timing.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const progress = createProgress(command.json ? undefined : io.err)
  const started = Date.now()
  try {
    const hold = io.env.DSH_REINDEX_HOLD
    const root = rootOf(command)
    const outcome = await untilInterrupted(io, 'the rebuild stops, its new index is removed and the old one stays', (signal) =>
      asCliRootError(() =>
        rebuildIndex({
          root,
          onProgress: (p) => progress.update(p.done, p.total, p.phase),
          signal,
          ...(hold === undefined || hold === '' ? {} : { beforeSwap: () => holdAt(hold) }),
        }),
      ),
    )
    progress.done()
    if ('interrupted' in outcome) return interruptedStatus(outcome.interrupted)
    const report = outcome.done
    const missing = await logLessSessions(report.root)
    const summary = {
      ...report,
      missing: missing.length,
      missingLogs: missing.map(({ id, code, message }) => ({ id, code, message })),
      ms: Date.now() - started,
    }
    if (command.json) printJson(summary, io.out)
    else {
      for (const log of missing)
        io.err.write(safe`dsh: warning: session ${log.id} is not indexed: ${log.message ?? ''} (${log.code ?? ''})\n`)
      io.out.write(
        safe`Reindexed ${report.root}: ${report.listed} sessions listed, ${report.read} logs read, ${report.corrupt} corrupt, ${report.failed} failed, ${missing.length} without a log, in ${summary.ms} ms.\n`,
      )
    }
    return 0
  } finally {
    progress.done()
  }
}
