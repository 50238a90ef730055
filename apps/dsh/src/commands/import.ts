import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { type ImportV0Report, importV0, type SessionImportResult } from '@dsh/session-import-v0'
import type { CommandIo, ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { openHost, rootOf, withReadHost } from '../host-access.js'
import { printJson, table } from '../output.js'
import { overlapOf } from '../overlap.js'
import { createProgress } from '../progress.js'
import { safe } from '../terminal.js'

/**
 * `dsh import <dir> --from dsh-v0 [--root R] [--dry-run] [--json]`: every
 * session of a harness v0 root into the dsh root. Reads <dir> only; per-session
 * faults are reported (typed reason) and never stop the run; a second run
 * imports nothing; exit 1 when any session failed. The dsh root must not
 * overlap <dir>, compared as given and through symlinks (real paths).
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const [dir, ...extra] = command.args
  if (dir === undefined || extra.length > 0)
    throw new CliError('CLI_USAGE', "'dsh import' takes exactly one directory: the v0 session root to read.")
  const format = command.string('from')
  if (format !== 'dsh-v0') {
    throw new CliError(
      'CLI_USAGE',
      `'dsh import' reads the harness's v0 roots only: pass --from dsh-v0${format === undefined ? '' : ` (got '${format}')`}.`,
    )
  }
  const from = resolve(dir)
  const root = rootOf(command)
  const overlap = overlapOf(from, root)
  if (overlap !== undefined) {
    const via = overlap.viaLinks ? safe` (through symlinks: ${overlap.realA} and ${overlap.realB})` : ''
    throw new CliError(
      'CLI_USAGE',
      safe`The v0 root ${from} and the dsh root ${root} overlap${via}; import into a separate --root (the v0 root is never written).`,
    )
  }
  const dryRun = command.flag('dry-run')
  const progress = command.json ? createProgress(undefined) : createProgress(io.err)
  const onProgress = ({ done, total, id }: { done: number; total: number; id?: string }): void => progress.update(done, total, id ?? '')
  let report: ImportV0Report
  try {
    if (dryRun) {
      // A dry run writes nothing anywhere: an existing root is opened read-only, a missing one compares against nothing.
      report = existsSync(root)
        ? await withReadHost(command, (host) => importV0({ from, persistence: host.persistence, dryRun, onProgress }), {}, io)
        : await importV0({ from, dryRun, onProgress })
    } else {
      const host = await openHost(command, {}, io)
      try {
        report = await importV0({ from, persistence: host.persistence, onProgress })
      } finally {
        await host.dispose()
      }
    }
  } finally {
    progress.done()
  }
  if (report.sessions.length === 0 && !command.json) {
    io.err.write(safe`dsh: no v0 session logs under ${from} (a v0 root holds --<project>--/<id>/session.jsonl.zstd and _no-cwd/<id>/…).\n`)
  }
  if (command.json) printJson({ root, ...report }, io.out)
  else {
    io.out.write(
      `${table(
        ['id', 'status', 'events', 'detail'],
        report.sessions.map((s) => [s.id ?? '?', s.status, String(s.events), detail(s)]),
      )}\n`,
    )
    const verb = dryRun ? 'Would import' : 'Imported'
    io.out.write(
      safe`${verb} ${report.imported}, updated ${report.updated}, unchanged ${report.unchanged}, failed ${report.failed} (from ${from} into ${root}).\n`,
    )
  }
  return report.failed > 0 ? 1 : 0
}

function detail(s: SessionImportResult): string {
  if (s.status === 'failed') return `${s.reason?.code}: ${s.reason?.message} (${s.path})`
  const parts: string[] = []
  if (s.appended > 0) parts.push(`${s.appended} appended`)
  if (s.forkSource !== undefined) parts.push(`fork of ${s.forkSource} by reference`)
  if (s.tornBytes !== undefined) parts.push(`torn tail of ${s.tornBytes} bytes skipped`)
  return parts.join(', ')
}
