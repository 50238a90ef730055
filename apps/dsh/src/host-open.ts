import { resolve } from 'node:path'
import type { Logger } from '@dsh/context'
import { escapeTerminal, isDshError } from '@dsh/context'
import type { QueryHostOptions } from '@dsh/host/query'
import { type CommandIo, DEFAULT_ROOT, type ParsedCommand } from './command.js'
import { CliError } from './errors.js'

// How every command opens a host, whichever kind (`createHost` or
// `createQueryHost`): this module imports no host code itself, so a read
// command loads only the host it asks for.

/** `--root`, resolved (default ./.dsh). */
export function rootOf(command: ParsedCommand): string {
  return resolve(command.root ?? DEFAULT_ROOT)
}

/**
 * Opens a host of the command's root with `create`, turning a bad root into
 * `CLI_ROOT_INVALID` with a hint; or, with `--store`/`DSH_DATABASE_URL`, a host over
 * that PostgreSQL database (read-only: no migration, no writer lease; an
 * unmigrated database is refused, not changed). Warnings go to stderr when
 * `io` is given.
 */
export async function openWith<O extends QueryHostOptions, H>(
  command: ParsedCommand,
  options: Omit<O, 'root'>,
  io: CommandIo | undefined,
  create: (options: O) => Promise<H>,
): Promise<H> {
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
    return await create({ ...rest, postgres: { connectionString: command.store } } as O)
  }
  return await asCliRootError(() => create({ root: rootOf(command), ...options } as O))
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

/**
 * Where the host's warnings go in the CLI: stderr, escaped like every other
 * printed text (a warning may quote an id or a path). One line per warning
 * with the error's message; `DSH_DEBUG=1` adds the stack.
 */
export function terminalLogger(io: CommandIo): Logger {
  const write = (level: string, message: string, error: unknown): void => {
    const text = message.replace(/^dsh: /, '')
    // A sentence's closing full stop gives way to the detail that follows it.
    const line = error === undefined ? text : `${text.replace(/\.$/, '')}: ${describe(error, io.env.DSH_DEBUG === '1')}`
    io.err.write(`dsh: ${level}${escapeTerminal(line)}\n`)
  }
  return { warn: (message, error) => write('warning: ', message, error), error: (message, error) => write('', message, error) }
}

/** A warning's detail as text: an error's message (its stack with `debug`), a string itself, other values as JSON (a host logs the problems it keeps off the wire as plain data). */
function describe(detail: unknown, debug: boolean): string {
  if (detail instanceof Error) return debug ? (detail.stack ?? detail.message) : detail.message
  if (typeof detail === 'string') return detail
  try {
    return JSON.stringify(detail) ?? String(detail)
  } catch {
    return String(detail)
  }
}
