import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { CliError } from './errors.js'

export interface CommandOptions {
  readonly root?: string | undefined
  readonly json: boolean
  readonly parent?: string | undefined
  readonly origin?: string | undefined
  readonly cwd?: string | undefined
  readonly limit?: string | undefined
  readonly cursor?: string | undefined
  readonly before?: string | undefined
  readonly descendants: boolean
  readonly events: boolean
  readonly port?: string | undefined
  readonly host?: string | undefined
  readonly token?: string | undefined
}

export interface ParsedCommand {
  readonly name: string
  readonly args: readonly string[]
  readonly options: CommandOptions
}

export interface CommandIo {
  readonly out: NodeJS.WritableStream
  readonly err: NodeJS.WritableStream & { isTTY?: boolean }
}

export const DEFAULT_ROOT = './.dsh'

/** The root of a read command: it must already exist (reads never invent a root). */
export function existingRoot(options: CommandOptions): string {
  const root = resolve(options.root ?? DEFAULT_ROOT)
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new CliError('CLI_ROOT_INVALID', `No session root at ${root}. Pass --root DIR (for example the directory 'dsh demo' printed).`)
  }
  return root
}

/** Parses an optional non-negative integer option. */
export function intOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value)) throw new CliError('CLI_USAGE', `--${name} must be a non-negative integer, got '${value}'.`)
  return Number(value)
}

/** The single positional argument of a command. */
export function onePositional(command: ParsedCommand, what: string): string {
  const [value, ...extra] = command.args
  if (value === undefined || extra.length > 0) throw new CliError('CLI_USAGE', `'dsh ${command.name}' takes exactly one ${what}.`)
  return value
}
