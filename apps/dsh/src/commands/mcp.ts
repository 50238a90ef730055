import { createMcpServer, McpError, serveStdio } from '@dsh/mcp'
import type { Session } from '@dsh/session'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { controlToolsOf } from './run.js'

/**
 * `dsh mcp [--root R] [--allow-control]`: a Model Context Protocol server on
 * stdin/stdout until the client disconnects. stdout carries the protocol
 * only; warnings go to stderr. Without `--allow-control` the host is opened
 * read-only (nothing in the root is created or written); with it, the
 * subagent-control tools act as the session each call names, loaded (and
 * crash-repaired) if it is not live.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const allowControl = command.flag('allow-control')
  const host = await openHost(command, allowControl ? { requireExisting: true } : { readOnly: true })
  try {
    warnIfExposed(host.root, io)
    const resolveAgent = async (id: string, signal: AbortSignal): Promise<Session> => {
      const live = host.sessions.get(id)
      if (live !== undefined) return live
      try {
        const loaded = await host.persistence.load(id as Session['id'], signal)
        return host.sessions.get(id) ?? host.sessions.restore(loaded)
      } catch (error) {
        throw new McpError(
          'MCP_AGENT_UNAVAILABLE',
          `Session '${id}' cannot act: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        )
      }
    }
    const server = createMcpServer(
      host.ctx,
      allowControl ? { allowControl, controlTools: controlToolsOf(host.subagents), resolveAgent } : {},
    )
    await serveStdio(server)
    return 0
  } finally {
    await host.dispose()
  }
}
