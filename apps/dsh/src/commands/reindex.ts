import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createSqliteSessionQuery, defaultIndexPath } from '@dsh/session-query-sqlite'
import { existingRoot, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson } from '../output.js'
import { createProgress } from '../progress.js'

/**
 * Rebuilds the derived query index from the logs, with a progress bar on a
 * TTY. Opens only what a rebuild needs (no reconcile on open, so the index is
 * built once) and never writes a log.
 */
export async function reindexCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh reindex' takes no positional arguments.")
  const root = existingRoot(command.options)
  const progress = createProgress(command.options.json ? ({ isTTY: false } as NodeJS.WriteStream) : process.stderr)
  const started = Date.now()
  const ctx = new Context()
  const persistence = createJsonlPersistence({ root })
  try {
    const query = await createSqliteSessionQuery({
      sessions: new SessionStore(ctx),
      persistence,
      path: defaultIndexPath(root),
      reconcileOnOpen: false,
      onProgress: (p) => progress.update(p.done, p.total, p.phase),
    })
    try {
      const report = await query.rebuild()
      progress.done()
      const summary = { root, ...report, ms: Date.now() - started }
      if (command.options.json) printJson(summary, io.out)
      else io.out.write(`Reindexed ${root}: ${report.listed} sessions listed, ${report.read} logs read, ${report.corrupt} corrupt, ${report.failed} failed, in ${summary.ms} ms.\n`)
      return 0
    } finally {
      await query.close()
    }
  } finally {
    progress.done()
    await persistence.close()
    await ctx.dispose()
  }
}
