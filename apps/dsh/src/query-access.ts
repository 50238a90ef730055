import { createQueryHost, type QueryHost } from '@dsh/host/query'
import type { CommandIo, ParsedCommand } from './command.js'
import { openWith } from './host-open.js'

/**
 * Runs `run` over a read-only query host of the command's root — the store,
 * persistence and query only, loaded through `@dsh/host/query`, so no
 * projection, subagent, zod or HTTP module is loaded — and always disposes
 * it. What `sessions`, `show` and `search` use: the same root checks
 * (`CLI_ROOT_INVALID`), `--store` handling and answers as `withReadHost`.
 */
export async function withQueryHost<T>(command: ParsedCommand, run: (host: QueryHost) => Promise<T>, io?: CommandIo): Promise<T> {
  const host = await openWith(command, { readOnly: true }, io, createQueryHost)
  try {
    return await run(host)
  } finally {
    await host.dispose()
  }
}
