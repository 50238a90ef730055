import { parseArgs } from 'node:util'
import { isDshError } from '@dsh/context'
import { agentsCommand } from './commands/agents.js'
import { demoCommand } from './commands/demo.js'
import { reindexCommand } from './commands/reindex.js'
import { searchCommand } from './commands/search.js'
import { serveCommand } from './commands/serve.js'
import { sessionsCommand } from './commands/sessions.js'
import { showCommand } from './commands/show.js'
import { verifyCommand } from './commands/verify.js'
import { CliError } from './errors.js'
import type { CommandIo, ParsedCommand } from './command.js'

const USAGE = `dsh — durable sessions and a subagent catalog

Usage: dsh <command> [options]

Commands:
  demo                       build a demo root and print its catalog live, cold with cache, cold without
  sessions                   list sessions   [--parent ID] [--origin subagent] [--cwd DIR] [--limit N] [--cursor C]
  show <id>                  a session's header and a page of history   [--before SEQ] [--limit N]
  agents <id>                a session's subagents, like list_agents   [--descendants]
  search <text>              full-text search over sessions   [--events] [--limit N] [--cursor C]
  verify                     check every log; exits 1 when any is corrupt
  reindex                    rebuild the query index (progress bar on a TTY)
  serve                      HTTP API + web catalog page   [--port N] [--host ADDR] [--token T]

Options:
  --root DIR                 the session root (default ./.dsh; demo: ./.dsh-demo)
  --json                     machine-readable output
  -h, --help                 this help
`

const OPTIONS = {
  root: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  parent: { type: 'string' },
  origin: { type: 'string' },
  cwd: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  before: { type: 'string' },
  descendants: { type: 'boolean', default: false },
  events: { type: 'boolean', default: false },
  port: { type: 'string' },
  host: { type: 'string' },
  token: { type: 'string' },
} as const

const COMMANDS: Record<string, (command: ParsedCommand, io: CommandIo) => Promise<number>> = {
  demo: demoCommand,
  sessions: sessionsCommand,
  show: showCommand,
  agents: agentsCommand,
  search: searchCommand,
  verify: verifyCommand,
  reindex: reindexCommand,
  serve: serveCommand,
}

/** Runs the CLI; resolves the exit code. Errors become `{ code, message }` (with --json) or one readable line. */
export async function runCli(argv: readonly string[], io: CommandIo = defaultIo()): Promise<number> {
  let json = argv.includes('--json')
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true })
    json = values.json
    const [name, ...rest] = positionals
    if (values.help || name === undefined || name === 'help') {
      io.out.write(USAGE)
      return name === undefined && !values.help ? 2 : 0
    }
    const command = COMMANDS[name]
    if (command === undefined) throw new CliError('CLI_UNKNOWN_COMMAND', `Unknown command '${name}'. Run 'dsh --help' for the list.`)
    return await command({ name, args: rest, options: values }, io)
  } catch (error) {
    const code = isDshError(error) ? error.code : error instanceof TypeError && 'code' in error ? 'CLI_USAGE' : 'CLI_INTERNAL'
    const message = error instanceof Error ? error.message : String(error)
    if (json) io.out.write(JSON.stringify({ error: { code, message } }, null, 2) + '\n')
    else io.err.write(`dsh: ${message}${code === 'CLI_INTERNAL' ? '' : ` (${code})`}\n`)
    return code === 'CLI_USAGE' || code === 'CLI_UNKNOWN_COMMAND' ? 2 : 1
  }
}

function defaultIo(): CommandIo {
  return { out: process.stdout, err: process.stderr }
}
