import { CliError } from './errors.js'

/** What `node:util` parseArgs accepts for one option. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean'
  readonly short?: string
  /** One line for `dsh <command> --help`. */
  readonly help: string
  /** Shown after the option name in help (string options), e.g. `N`. */
  readonly value?: string
}

/** A command's module: loaded only when that command runs. */
export interface CommandModule {
  run(command: ParsedCommand, io: CommandIo): Promise<number>
}

/**
 * One entry of the command table (commands.ts). The entry itself is cheap
 * (text and option specs); the command's code and everything it imports
 * load through `load()` only when the command runs.
 */
export interface CommandSpec {
  /** One line for `dsh --help`. */
  readonly summary: string
  /** Positional arguments, e.g. `<id>`. */
  readonly args?: string
  readonly options?: Readonly<Record<string, OptionSpec>>
  /**
   * The command also runs on a PostgreSQL store: `true` takes `--store
   * postgres://…` or the environment (`DSH_DATABASE_URL`, `DSH_STORE`);
   * `'flag'` only an explicit `--store` (a command that would write demo data
   * into whatever database the environment names).
   */
  readonly store?: boolean | 'flag'
  load(): Promise<CommandModule>
}

export interface ParsedCommand {
  readonly name: string
  readonly args: readonly string[]
  readonly json: boolean
  /** `--root` as given (undefined: the command's default). */
  readonly root: string | undefined
  /** A PostgreSQL connection string from `--store`, `DSH_DATABASE_URL` or `DSH_STORE`, for commands that support one. */
  readonly store: string | undefined
  /** A string option of this command, if given. */
  string(name: string): string | undefined
  /** A boolean option of this command (false if absent). */
  flag(name: string): boolean
}

export interface CommandIo {
  readonly out: NodeJS.WritableStream
  readonly err: NodeJS.WritableStream & { isTTY?: boolean }
  readonly env: NodeJS.ProcessEnv
}

export const DEFAULT_ROOT = './.dsh'

/** The values an integer option accepts (`intOption`): whole numbers from `min` (default 0) to `max` (default the largest safe integer). */
export interface IntRange {
  readonly min?: number
  readonly max?: number
}

/**
 * Parses an optional integer option: decimal digits only (no sign, point or
 * exponent), a safe integer (a longer one is not rounded to a neighbour),
 * within `range`; anything else is `CLI_USAGE` naming the range and the
 * value as typed.
 */
export function intOption(command: ParsedCommand, name: string, range: IntRange = {}): number | undefined {
  const value = command.string(name)
  if (value === undefined) return undefined
  const min = range.min ?? 0
  const max = range.max ?? Number.MAX_SAFE_INTEGER
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN
  if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max)
    throw new CliError('CLI_USAGE', `--${name} must be an integer from ${min} to ${max}, got '${value}'.`)
  return parsed
}

/**
 * Parses `--limit`: an integer from 1 to `max` (the cap the command's
 * backend read declares, `@dsh/protocol/limits`), else `CLI_USAGE` naming
 * that range and the value as typed (zero, negative values and numbers past
 * the cap or past what a double holds exactly too, however they are spelled).
 */
export function limitOption(command: ParsedCommand, max: number): number | undefined {
  return intOption(command, 'limit', { min: 1, max })
}

/** The single positional argument of a command. */
export function onePositional(command: ParsedCommand, what: string): string {
  const [value, ...extra] = command.args
  if (value === undefined || extra.length > 0) throw new CliError('CLI_USAGE', `'dsh ${command.name}' takes exactly one ${what}.`)
  return value
}

/** Refuses positional arguments for commands that take none. */
export function noPositionals(command: ParsedCommand, hint = ''): void {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', `'dsh ${command.name}' takes no positional arguments${hint}.`)
}
