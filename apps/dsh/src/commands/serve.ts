import { randomBytes } from 'node:crypto'
import { createApiServer } from '@dsh/apiproxy'
import { existingRoot, intOption, type CommandIo, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { createHost } from '../host.js'
import { printJson } from '../output.js'

/** Serves the HTTP API and the web catalog page until SIGINT/SIGTERM. */
export async function serveCommand(command: ParsedCommand, io: CommandIo): Promise<number> {
  if (command.args.length > 0) throw new CliError('CLI_USAGE', "'dsh serve' takes no positional arguments.")
  const root = existingRoot(command.options)
  const port = intOption(command.options.port, 'port') ?? 0
  const token = command.options.token ?? process.env.DSH_TOKEN ?? randomBytes(18).toString('base64url')
  const host = await createHost({ root })
  const server = await createApiServer({ ctx: host.ctx, token, port, ...(command.options.host === undefined ? {} : { host: command.options.host }) }).catch(async (error: unknown) => {
    await host.dispose()
    throw error
  })
  if (command.options.json) printJson({ root, url: server.url, pageUrl: server.pageUrl }, io.out)
  else io.out.write(`dsh serving ${root}\n  API:  ${server.url}/api (Authorization: Bearer <token>)\n  page: ${server.pageUrl}\nPress Ctrl+C to stop.\n`)
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await server.close()
  await host.dispose()
  return 0
}
