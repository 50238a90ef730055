import { randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, type Stats } from 'node:fs'
import type { HostOptions } from '@dsh/host'
import { type CommandIo, intOption, noPositionals, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { printJson } from '../output.js'
import { priceTableOf } from '../prices.js'
import { safe } from '../terminal.js'

/**
 * Serves the HTTP API and the web catalog page over an existing root until
 * SIGINT/SIGTERM. The token comes from `--token-file` (a 0600 file), then
 * `DSH_TOKEN`, then `--token` (which works but warns: every local user sees
 * it in `ps`); with none, a random one is made and shown in the page URL.
 * With a model API key the compaction route is served (see `summarizerOf`).
 * The price table of `--prices FILE` (else `DSH_PRICES`) prices the cost of
 * the listing, the stats route and the page; it is read before the root is,
 * so a bad table fails with its own code and nothing is opened.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const port = intOption(command, 'port', { max: 65_535 }) ?? 0
  const token = resolveToken(command, io)
  const bind = command.string('host')
  const prices = await priceTableOf(command, io)
  const summarizer = await summarizerOf(command, io)
  const host = await openHost(
    command,
    {
      requireExisting: true,
      http: { token, port, ...(bind === undefined ? {} : { host: bind }) },
      ...(summarizer === undefined ? {} : { summarizer }),
      ...(prices === undefined ? {} : { prices }),
    },
    io,
  )
  warnIfExposed(host.root, io)
  const server = host.http!
  if (command.json) printJson({ root: host.root, url: server.url, pageUrl: server.pageUrl }, io.out)
  else
    io.out.write(
      safe`dsh serving ${host.root}\n  API:  ${server.url}/api (Authorization: Bearer <token>)\n  page: ${server.pageUrl}\nPress Ctrl+C to stop.\n`,
    )
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await host.dispose()
  return 0
}

/**
 * With an API key in DSH_API_KEY or OPENAI_API_KEY, the host writes
 * compaction summaries through that OpenAI-compatible model (`--model`,
 * `--base-url`), so `POST /api/sessions/:id/compact` is served; without one
 * that route answers 501. The driver package loads only then.
 */
async function summarizerOf(command: ParsedCommand, io: CommandIo): Promise<HostOptions['summarizer']> {
  const { API_KEY_ENV, createModelClient, createOpenAISummarizer } = await import('@dsh/driver-openai')
  if (!API_KEY_ENV.some((name) => (io.env[name] ?? '').length > 0)) return undefined
  const model = command.string('model')
  const baseURL = command.string('base-url')
  const client = createModelClient({
    env: io.env,
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
  })
  return createOpenAISummarizer({ client })
}

function resolveToken(command: ParsedCommand, io: CommandIo): string {
  const file = command.string('token-file')
  const flag = command.string('token')
  if (file !== undefined && flag !== undefined)
    throw new CliError('CLI_USAGE', 'Give the token once: --token-file FILE or --token T, not both.')
  if (file !== undefined) return readTokenFile(file)
  const env = io.env.DSH_TOKEN
  if (flag !== undefined) {
    io.err.write(
      'dsh: warning: --token is visible to every local user (ps, /proc); pass it in DSH_TOKEN or --token-file FILE (mode 0600) instead.\n',
    )
    return flag
  }
  if (env !== undefined && env.length > 0) return env
  return randomBytes(24).toString('base64url')
}

/**
 * A token file must be a regular file that only its owner can read (0600 or
 * stricter) holding the token on one line, surrounding whitespace ignored: a
 * line break inside it would be part of the token, which no HTTP client can
 * send in a header, so several lines are refused. Its type is checked
 * (lstat) before it is opened, and the open does not block (O_NONBLOCK), so a
 * FIFO or a device is refused instead of hanging the open or reading from it.
 */
function readTokenFile(path: string): string {
  let linkStats: Stats | undefined
  try {
    linkStats = lstatSync(path)
  } catch {
    // Missing or unreachable: the open below reports why.
  }
  if (linkStats !== undefined && !linkStats.isFile() && !linkStats.isSymbolicLink()) notRegular(path)
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new CliError(
      'CLI_TOKEN_INVALID',
      `The token file ${path} cannot be opened (${code ?? 'error'}${code === 'ELOOP' ? ': a symlink' : ''}).`,
      { cause: error },
    )
  }
  try {
    const stats = fstatSync(fd)
    if (!stats.isFile()) notRegular(path)
    if ((stats.mode & 0o077) !== 0) {
      const mode = (stats.mode & 0o777).toString(8).padStart(3, '0')
      throw new CliError('CLI_TOKEN_INVALID', `The token file ${path} is readable by other users (mode ${mode}). Run: chmod 600 '${path}'`)
    }
    const token = readFileSync(fd, 'utf8').trim()
    if (token.length === 0) throw new CliError('CLI_TOKEN_INVALID', `The token file ${path} is empty.`)
    if (/[\r\n]/.test(token))
      throw new CliError(
        'CLI_TOKEN_INVALID',
        `The token file ${path} holds more than one line; it must hold the token alone, on one line (no HTTP client can send a line break in a header).`,
      )
    return token
  } finally {
    closeSync(fd)
  }
}

function notRegular(path: string): never {
  throw new CliError('CLI_TOKEN_INVALID', `The token file ${path} is not a regular file; write the token into a regular file of mode 0600.`)
}
