import { resolve } from 'node:path'
import type { Logger } from '@dsh/context'
import { isDshError } from '@dsh/context'
import { createHost, type Host, type HostOptions, rootPermissionWarning } from '@dsh/host'
import { type CommandIo, DEFAULT_ROOT, type ParsedCommand } from './command.js'
import { CliError } from './errors.js'
import { escapeTerminal, safe } from './terminal.js'

/** `--root`, resolved (default ./.dsh). */
export function rootOf(command: ParsedCommand): string {
  return resolve(command.root ?? DEFAULT_ROOT)
}

/**
 * Runs `run` over a read-only host of the command's root and always disposes
 * it. Reads never write: the root must already be a dsh root
 * (`CLI_ROOT_INVALID` otherwise) and nothing is created in it.
 */
export async function withReadHost<T>(
  command: ParsedCommand,
  run: (host: Host) => Promise<T>,
  options: Omit<HostOptions, 'root' | 'readOnly'> = {},
  io?: CommandIo,
): Promise<T> {
  const host = await openHost(command, { ...options, readOnly: true }, io)
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}

/**
 * Opens a host of the command's root, turning a bad root into
 * `CLI_ROOT_INVALID` with a hint; or, with `--store`/`DSH_STORE`, a host over
 * that PostgreSQL database (read-only: no migration, no writer lease; an
 * unmigrated database is refused, not changed).
 */
export async function openHost(command: ParsedCommand, options: Omit<HostOptions, 'root'>, io?: CommandIo): Promise<Host> {
  if (io !== undefined && options.logger === undefined) options = { ...options, logger: terminalLogger(io) }
  if (command.store !== undefined) {
    const {
      requireExisting: _existing,
      compression: _compression,
      persistence: _persistence,
      onIndexProgress: _progress,
      // The SQLite index's worker and budget: PostgreSQL answers queries on its own connections.
      queryWorker: _worker,
      queryBudget: _budget,
      ...rest
    } = options
    return await createHost({ ...rest, postgres: { connectionString: command.store } })
  }
  return await asCliRootError(() => createHost({ root: rootOf(command), ...options }))
}

/** Maps the host's `HOST_ROOT_INVALID` to the CLI's `CLI_ROOT_INVALID`, adding what to do. */
export async function asCliRootError<T>(open: () => Promise<T>): Promise<T> {
  try {
    return await open()
  } catch (error) {
    if (isDshError(error, 'HOST_ROOT_INVALID')) {
      throw new CliError('CLI_ROOT_INVALID', `${error.message} Pass --root DIR (for example the directory 'dsh demo' printed).`, {
        cause: error,
      })
    }
    throw error
  }
}

/** Session data is private: warns (stderr) when group or others can read the root. */
export function warnIfExposed(root: string, io: CommandIo): void {
  const warning = rootPermissionWarning(root)
  if (warning !== undefined) io.err.write(safe`dsh: warning: ${warning}\n`)
}

/**
 * Where the host's warnings go in the CLI: stderr, escaped like every other
 * printed text (a warning may quote an id or a path). One line per warning
 * with the error's message; `DSH_DEBUG=1` adds the stack.
 */
export function terminalLogger(io: CommandIo): Logger {
  const write = (level: string, message: string, error: unknown): void => {
    const detail =
      error === undefined
        ? ''
        : `: ${io.env.DSH_DEBUG === '1' && error instanceof Error ? (error.stack ?? error.message) : error instanceof Error ? error.message : String(error)}`
    io.err.write(`dsh: ${level}${escapeTerminal(message.replace(/^dsh: /, '') + detail)}\n`)
  }
  return { warn: (message, error) => write('warning: ', message, error), error: (message, error) => write('', message, error) }
}
