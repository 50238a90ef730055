import { parseArgs } from 'node:util'
import { escapeTerminal, isDshError } from '@dsh/context'
import { guardedStderr } from './broken-pipe.js'
import type { CommandIo, CommandSpec, OptionSpec, ParsedCommand } from './command.js'
import { COMMANDS } from './commands.js'
import { CliError } from './errors.js'

/** Options every command takes. */
const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  root: { type: 'string', value: 'DIR', help: 'the session root (default ./.dsh; demo: ./.dsh-demo)' },
  store: { type: 'string', value: 'URL', help: 'a PostgreSQL store (postgres://…) instead of a root; or DSH_DATABASE_URL (DSH_STORE)' },
  json: { type: 'boolean', help: 'machine-readable output (errors too)' },
  help: { type: 'boolean', short: 'h', help: 'this help' },
}

/** Runs the CLI; resolves the exit code. Errors become `{ error: { code, message, details? } }` (with --json) or one readable line. */
export async function runCli(argv: readonly string[], io: CommandIo = defaultIo()): Promise<number> {
  let json = argv.includes('--json')
  try {
    const name = commandName(argv)
    if (name === undefined || name === 'help') {
      const help = argv.includes('--help') || argv.includes('-h') || name === 'help'
      // Without a command, --json asks for a machine-readable answer: the usage error, as JSON.
      if (!help && json) throw new CliError('CLI_USAGE', "No command given. Run 'dsh --help' for the list of commands.")
      io.out.write(usage())
      return help ? 0 : 2
    }
    const spec = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
    if (spec === undefined) throw new CliError('CLI_UNKNOWN_COMMAND', `Unknown command '${name}'. Run 'dsh --help' for the list.`)
    const command = parse(name, spec, argv, io)
    json = command.json
    if (command.flag('help')) {
      io.out.write(commandUsage(name, spec))
      return 0
    }
    const module = await spec.load()
    return await module.run(command, io)
  } catch (error) {
    const { code, message } = describeError(error)
    // The CLI's own errors may carry machine-readable details (e.g. the counts of `trace`'s CLI_TRACE_UNDELIVERED).
    const details = error instanceof CliError ? error.details : undefined
    if (json) io.out.write(`${JSON.stringify({ error: { code, message, ...(details === undefined ? {} : { details }) } }, null, 2)}\n`)
    else io.err.write(`dsh: ${escapeTerminal(message)}${code === 'CLI_INTERNAL' ? '' : ` (${code})`}\n`)
    return code === 'CLI_USAGE' || code === 'CLI_UNKNOWN_COMMAND' ? 2 : 1
  }
}

function parse(name: string, spec: CommandSpec, argv: readonly string[], io: CommandIo): ParsedCommand {
  const specs = { ...GLOBAL_OPTIONS, ...spec.options }
  const options = Object.fromEntries(
    Object.entries(specs).map(([key, o]) => [key, o.short === undefined ? { type: o.type } : { type: o.type, short: o.short }]),
  )
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true })
  } catch (error) {
    // parseArgs's message may run over lines and end a sentence itself: one line, and one full stop before the hint.
    const text = (error as Error).message
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.length > 0)
      .join(' ')
    throw new CliError('CLI_USAGE', `${text}${/[.?!]$/.test(text) ? '' : '.'} Run 'dsh ${name} --help' for its options.`, {
      cause: error,
    })
  }
  const { values, positionals } = parsed
  // The command name is the first positional (see commandName).
  const args = positionals.slice(1)
  const stringValue = (key: string): string | undefined => {
    const value = values[key]
    return typeof value === 'string' ? value : undefined
  }
  if (stringValue('store') !== undefined && stringValue('root') !== undefined) {
    throw new CliError('CLI_USAGE', 'Give one place for the sessions: --root DIR or --store URL, not both.')
  }
  // An explicit --root wins over DSH_DATABASE_URL/DSH_STORE from the environment.
  const store = stringValue('root') === undefined ? storeOf(name, spec, stringValue('store'), io) : undefined
  return {
    name,
    args,
    json: values.json === true,
    root: stringValue('root'),
    store,
    string: stringValue,
    flag: (key) => values[key] === true,
  }
}

/**
 * The PostgreSQL store of a command: `--store`, else `DSH_DATABASE_URL` or
 * `DSH_STORE` (ignored by commands that work on a local root only, and by
 * `demo`, which writes: it takes the flag only; `--store` given to a
 * local-only command is `CLI_USAGE`). A password on the command line works but warns: `ps` shows it.
 */
function storeOf(name: string, spec: CommandSpec, flag: string | undefined, io: CommandIo): string | undefined {
  if (flag !== undefined && (spec.store === undefined || spec.store === false)) {
    throw new CliError('CLI_USAGE', `'dsh ${name}' works on a local session root; it does not take --store.`)
  }
  const store = flag ?? (spec.store === true ? storeFromEnv(io.env) : undefined)
  if (store === undefined) return undefined
  let url: URL
  try {
    url = new URL(store)
  } catch {
    throw new CliError('CLI_USAGE', '--store must be a postgres:// URL (the value given is not a URL).')
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new CliError('CLI_USAGE', `--store must be a postgres:// or postgresql:// URL, not ${url.protocol}//.`)
  }
  if (flag !== undefined && url.password !== '') {
    io.err.write(
      'dsh: warning: the --store URL holds a password that every local user sees in ps; use DSH_DATABASE_URL, PGPASSWORD or ~/.pgpass instead.\n',
    )
  }
  return store
}

/**
 * The store named by the environment: `DSH_DATABASE_URL`, or its alias
 * `DSH_STORE`. Both set to different URLs is ambiguous:
 * `CLI_USAGE`, nothing is opened.
 */
function storeFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const set = (value: string | undefined): string | undefined => (value === undefined || value === '' ? undefined : value)
  const database = set(env.DSH_DATABASE_URL)
  const store = set(env.DSH_STORE)
  if (database !== undefined && store !== undefined && database !== store) {
    throw new CliError('CLI_USAGE', 'DSH_DATABASE_URL and DSH_STORE name different stores; unset one of them (or pass --store URL).')
  }
  return database ?? store
}

/** The first positional argument, skipping global options and the values of `--root` and `--store`. */
function commandName(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--root' || arg === '--store') i++
    else if (!arg.startsWith('-')) return arg
  }
  return undefined
}

/** Typed errors keep their code; anything else is `CLI_INTERNAL` (a bug to report). */
function describeError(error: unknown): { code: string; message: string } {
  const message = error instanceof Error ? error.message : String(error)
  return { code: isDshError(error) ? error.code : 'CLI_INTERNAL', message }
}

function usage(): string {
  const width = Math.max(...Object.entries(COMMANDS).map(([n, s]) => `${n} ${s.args ?? ''}`.length)) + 2
  const lines = Object.entries(COMMANDS).map(([n, s]) => `  ${`${n} ${s.args ?? ''}`.padEnd(width)} ${s.summary}`)
  return `dsh — durable sessions and a subagent catalog

Usage: dsh <command> [options]      dsh <command> --help for its options

Commands:
${lines.join('\n')}

Options:
${optionLines(GLOBAL_OPTIONS)}
`
}

function commandUsage(name: string, spec: CommandSpec): string {
  const own = spec.options === undefined ? '' : `\nOptions:\n${optionLines(spec.options)}\n`
  return `Usage: dsh ${name}${spec.args === undefined ? '' : ` ${spec.args}`} [options]\n\n${spec.summary}\n${own}\nGlobal options:\n${optionLines(GLOBAL_OPTIONS)}\n`
}

function optionLines(specs: Readonly<Record<string, OptionSpec>>): string {
  const left = (key: string, o: OptionSpec): string =>
    `${o.short === undefined ? '    ' : `-${o.short}, `}--${key}${o.value === undefined ? '' : ` ${o.value}`}`
  const width = Math.max(...Object.entries(specs).map(([k, o]) => left(k, o).length)) + 2
  return Object.entries(specs)
    .map(([k, o]) => `  ${left(k, o).padEnd(width)} ${o.help}`)
    .join('\n')
}

function defaultIo(): CommandIo {
  // stderr on first use (see guardedStderr): most commands never write to it.
  return {
    out: process.stdout,
    get err() {
      return guardedStderr()
    },
    env: process.env,
  }
}
