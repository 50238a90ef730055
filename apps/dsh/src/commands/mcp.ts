import { API_KEY_ENV, createModelClient, createOpenAIDriver, createOpenAISummarizer } from '@dsh/driver-openai'
import { createMcpServer, McpError, serveStdio } from '@dsh/mcp'
import type { Session } from '@dsh/session'
import type { SubagentDriver } from '@dsh/subagent'
import { type SubagentControl, type SubagentControlDialect, subagentControlTools } from '@dsh/tool-subagent-control'
import { commandAgentDefinitions } from '../agent-definitions-access.js'
import { type CommandIo, intOption, noPositionals, type ParsedCommand } from '../command.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { priceTableOf } from '../prices.js'
import { controlToolsOf, dialectOf, noticesOf } from './run.js'

/** The server's limits from the flags; anything unset takes its default from @dsh/protocol/limits. */
function limitsOf(command: ParsedCommand): {
  maxMessageBytes?: number
  limits: { maxChildren?: number; maxConcurrentRuns?: number }
} {
  const maxMessageBytes = intOption(command, 'max-message-bytes', { min: 1 })
  const maxChildren = intOption(command, 'max-children', { min: 1 })
  const maxConcurrentRuns = intOption(command, 'max-concurrent-runs', { min: 1 })
  return {
    ...(maxMessageBytes === undefined ? {} : { maxMessageBytes }),
    limits: {
      ...(maxChildren === undefined ? {} : { maxChildren }),
      ...(maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns }),
    },
  }
}

/** The model client `--model` / `--base-url` and the environment name. */
function modelClient(command: ParsedCommand, io: CommandIo) {
  const model = command.string('model')
  const baseURL = command.string('base-url')
  return createModelClient({ env: io.env, ...(model === undefined ? {} : { model }), ...(baseURL === undefined ? {} : { baseURL }) })
}

/**
 * The driver of children started over MCP: a model over the OpenAI-compatible
 * API when a key is in the environment (DSH_API_KEY / OPENAI_API_KEY), with
 * --model / --base-url; otherwise the host's scripted driver, said on stderr.
 */
function childDriver(command: ParsedCommand, io: CommandIo, dialect: SubagentControlDialect): SubagentDriver | undefined {
  if (!API_KEY_ENV.some((name) => (io.env[name] ?? '').length > 0)) {
    io.err.write('dsh: no DSH_API_KEY or OPENAI_API_KEY: subagents started over MCP run the scripted demo driver, not a model.\n')
    return undefined
  }
  const model = command.string('model')
  const baseURL = command.string('base-url')
  return createOpenAIDriver({
    env: io.env,
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
    ...noticesOf(dialect),
  })
}

/**
 * `dsh mcp [--root R] [--dialect dsh|harness] [--max-message-bytes N] [--prices FILE]
 * [--allow-control [--model M] [--base-url URL] [--max-children N] [--max-concurrent-runs N]]`:
 * a Model Context Protocol server on stdin/stdout until the client
 * disconnects. stdout carries the protocol only; warnings, and one line per
 * message refused for its size, go to stderr. The control tools start at
 * most `--max-children` subagents per session and keep at most
 * `--max-concurrent-runs` child runs going; past either a call is a tool
 * error (`MCP_CHILD_LIMIT`, `MCP_RUN_LIMIT`).
 * Without `--allow-control` the host is opened read-only (nothing in the
 * root is created or written); with it, the subagent-control tools act as
 * the session each call names, loaded (and crash-repaired) if it is not
 * live. `--dialect harness` serves the control tools in the harness's shapes
 * and `list_agents` text as such a model reads it. A price table (`--prices`
 * or `DSH_PRICES`) prices `cost` in `list_sessions`, `list_agents` and
 * `session_stats`, and children's cost budgets.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const dialect = dialectOf(command)
  const { maxMessageBytes, limits } = limitsOf(command)
  const allowControl = command.flag('allow-control')
  const driver = allowControl ? childDriver(command, io, dialect) : undefined
  const prices = await priceTableOf(command, io)
  const host = await openHost(
    command,
    {
      // A server: a slow search answers only its own call, and a signal stops it at once.
      queryWorker: true,
      // Prices the read tools' cost and, with control, children's cost budgets.
      ...(prices === undefined ? {} : { prices }),
      ...(allowControl
        ? {
            requireExisting: true,
            tools: (agent, runtime) => controlToolsOf(runtime, dialect, agent),
            // With a model, `compact_session` summarizes through it too.
            ...(driver === undefined ? {} : { driver, summarizer: createOpenAISummarizer({ client: modelClient(command, io) }) }),
          }
        : { readOnly: true }),
    },
    io,
  )
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
    const agents = commandAgentDefinitions(command)
    const server = createMcpServer(host.ctx, {
      agentDefinitions: agents,
      ...(dialect === 'harness' ? { listAgentsFormat: 'harness' as const } : {}),
      ...(prices === undefined ? {} : { prices }),
      ...(allowControl
        ? {
            allowControl,
            control: host.subagents,
            // The tools drive the server's bounded view of the runtime, so its limits hold.
            controlTools: (control: SubagentControl) => subagentControlTools(control, { dialect, agents }),
            limits,
            resolveAgent,
          }
        : {}),
    })
    // A client that stops its server with a signal still gets a clean shutdown: runs drained, logs flushed.
    const stop = (): void => void server.close()
    process.once('SIGINT', stop)
    process.once('SIGTERM', stop)
    try {
      await serveStdio(server, maxMessageBytes === undefined ? {} : { maxMessageBytes })
    } finally {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
    }
    return 0
  } finally {
    await host.dispose()
  }
}
