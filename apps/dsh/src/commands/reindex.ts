import { rmSync } from 'node:fs'
import { defaultIndexPath } from '@dsh/session-query-sqlite'
import { existingRoot, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { withHost } from '../open-host.js'
import { printJson } from '../output.js'
import { createProgress } from '../progress.js'

/** Rebuilds the derived query index from the logs, with a progress bar on a TTY. */
export async function reindexCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh reindex' takes no positional arguments.")
  const root = existingRoot(command.options)
  // The index is derived data: removing it first makes the open below a full rebuild.
  rmSync(defaultIndexPath(root), { force: true })
  const progress = createProgress(command.options.json ? ({ isTTY: false } as NodeJS.WriteStream) : process.stderr)
  const started = Date.now()
  const report = await withHost(root, async (host) => {
    const query = host.query as { rebuild?: (signal?: AbortSignal) => Promise<unknown> }
    if (query.rebuild === undefined) throw new CliError('CLI_USAGE', 'This host has no query index to rebuild.')
    return query.rebuild()
  }, { projectionCache: false, onIndexProgress: (p) => progress.update(p.done, p.total, p.phase) })
  progress.done()
  const summary = { root, ...(report as object), ms: Date.now() - started }
  if (command.options.json) printJson(summary, io.out)
  else io.out.write(`Reindexed ${root}: ${JSON.stringify(report)} in ${summary.ms} ms\n`)
  return 0
}
