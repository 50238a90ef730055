import { createHost, type Host, type HostOptions, rootPermissionWarning } from '@dsh/host'
import type { CommandIo, ParsedCommand } from './command.js'
import { openWith } from './host-open.js'
import { safe } from './terminal.js'

export { asCliRootError, rootOf, terminalLogger } from './host-open.js'

/**
 * Runs `run` over a read-only host of the command's root and always disposes
 * it. Reads never write: the root must already be a dsh root
 * (`CLI_ROOT_INVALID` otherwise) and nothing is created in it. Commands that
 * need only listings, history and search use `withQueryHost` (cheaper).
 */
export async function withReadHost<T>(
  command: ParsedCommand,
  run: (host: Host) => Promise<T>,
  options: Omit<HostOptions, 'root' | 'readOnly'>,
  io: CommandIo,
): Promise<T> {
  const host = await openHost(command, { ...options, readOnly: true }, io)
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}

/**
 * Opens a full host of the command's root (see `openWith` for roots,
 * `--store` and errors).
 */
export async function openHost(command: ParsedCommand, options: Omit<HostOptions, 'root'>, io: CommandIo): Promise<Host> {
  return await openWith(command, options, io, createHost)
}

/** Session data is private: warns (stderr) when group or others can read the root. */
export function warnIfExposed(root: string, io: CommandIo): void {
  const warning = rootPermissionWarning(root)
  if (warning !== undefined) io.err.write(safe`dsh: warning: ${warning}\n`)
}
