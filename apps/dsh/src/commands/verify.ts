import type { Logger } from '@dsh/context'
import { checkDerivedFiles, type DerivedCheck, type DerivedChecks, type VerifiedLog, verifyPostgres, verifyRoot } from '@dsh/host'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { asCliRootError, rootOf, terminalLogger, warnIfExposed } from '../host-access.js'
import { logLessSessions } from '../log-less-dirs.js'
import { printJson, table } from '../output.js'
import { safe } from '../terminal.js'

/**
 * Reads every committed log in full and reports torn tails and corruption,
 * including logs whose header is too damaged to list, and session
 * directories without a log (with or without a query index that still lists
 * them). Exits 1 when any log is corrupt, unreadable or missing (a torn tail
 * alone is not an error). Also runs
 * quick_check over the derived index and cache that exist and reports a
 * damaged one, with how to make it again (derived data). Never writes,
 * creates or removes a file; refuses a directory that is not a dsh root;
 * warns when others can read it.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const { root, logs, derived } = command.store === undefined ? await verifyLocal(command, io) : await verifyStore(command.store)
  const count = (status: VerifiedLog['status']): number => logs.filter((r) => r.status === status).length
  const bad = logs.filter((r) => r.status === 'corrupt' || r.status === 'error')
  if (command.json) {
    printJson(
      {
        root,
        checked: logs.length,
        ok: count('ok'),
        torn: count('torn'),
        corrupt: count('corrupt'),
        errors: count('error'),
        sessions: logs,
        ...(derived === undefined ? {} : { derived }),
      },
      io.out,
    )
  } else {
    io.out.write(
      `${table(
        ['id', 'status', 'events / problem'],
        logs.map((r) => [r.id, r.status, describe(r)]),
      )}\n`,
    )
    const torn = count('torn') > 0 ? ` (${count('torn')} with a torn tail that the next load truncates)` : ''
    io.out.write(
      bad.length === 0
        ? `All ${logs.length} logs verified${torn}.\n`
        : safe`${bad.length} of ${logs.length} logs failed verification: ${bad.map((r) => r.id).join(', ')}\n`,
    )
    if (derived !== undefined) {
      io.out.write(
        `${describeDerived('query index', derived.index, 'dsh reindex rebuilds it')}\n${describeDerived('projection cache', derived.projectionCache, 'remove it and the next writable host makes it again')}\n`,
      )
    }
  }
  return bad.length === 0 ? 0 : 1
}

/**
 * A JSONL root: its logs (and the session directories without one that no
 * other check named), then its derived files; warns when others can read
 * the root. A derived file that cannot be opened is reported in the output
 * (`damaged`) and warned about once on stderr, escaped, without a stack.
 */
async function verifyLocal(
  command: ParsedCommand,
  io: CommandIo,
): Promise<{ root: string; logs: readonly VerifiedLog[]; derived: DerivedChecks }> {
  const { root, logs } = await asCliRootError(() => verifyRoot(rootOf(command)))
  warnIfExposed(root, io)
  const named = new Set(logs.map((log) => log.id))
  const logLess = (await logLessSessions(root)).filter((log) => !named.has(log.id))
  return { root, logs: [...logs, ...logLess], derived: await checkDerivedFiles(root, { logger: onceEach(terminalLogger(io)) }) }
}

/** `logger` with each distinct line passed on once: the readers that open a damaged file may warn about it more than once. */
function onceEach(logger: Logger): Logger {
  const seen = new Set<string>()
  const first = (level: string, message: string, error: unknown): boolean => {
    const key = `${level}\0${message}\0${error instanceof Error ? error.message : String(error)}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  }
  return {
    warn: (message, error) => {
      if (first('warn', message, error)) logger.warn(message, error)
    },
    error: (message, error) => {
      if (first('error', message, error)) logger.error(message, error)
    },
  }
}

/** A PostgreSQL store: its tables are authoritative, there are no derived files to check. */
async function verifyStore(store: string): Promise<{ root: string; logs: readonly VerifiedLog[]; derived?: undefined }> {
  return await verifyPostgres({ connectionString: store })
}

/** Derived files never fail verify: a damaged one costs only its rebuild (`remedy`), an absent one is built on the next writable open. */
function describeDerived(name: string, check: DerivedCheck, remedy: string): string {
  if (check.status === 'ok') return safe`${name}: quick_check ok (${check.file})`
  if (check.status === 'absent') return safe`${name}: absent (${check.file}; built when a writable host opens the root)`
  return safe`${name}: failed quick_check (${check.problem ?? 'unknown'}); left as it is: ${remedy} (${check.file}; derived data)`
}

function describe(row: VerifiedLog): string {
  if (row.status === 'ok') return `${row.events} events`
  if (row.status === 'torn') return `${row.events} events + ${row.tornBytes} bytes of torn tail`
  return `${row.code}: ${row.message}`
}
