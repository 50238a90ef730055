import type { CompactionService } from '@dsh/compaction'
import type { Session } from '@dsh/session'
import { z } from 'zod'
import { McpError } from './errors.js'
import { controlSessionField } from './schemas.js'
import { type McpTool, parseInput } from './tools.js'

export const compactSessionInput = z.strictObject({
  session: controlSessionField,
  keep: z.number().int().min(0).max(10_000).optional().describe('The newest context messages left verbatim (default 4).'),
})

export const COMPACT_SESSION_DESCRIPTION =
  "Compacts a session's model-visible context: all but the newest 'keep' messages are summarized by the host's model and replaced by the summary in what the model sees next. Nothing in the session's log is removed or rewritten. Answers the shadowed event range and the estimated tokens before and after."

/**
 * `compact_session` (control tools only): one call of the host's
 * `compaction` service on the session, made live first (its load runs crash
 * repair; a session another process writes is refused).
 */
export function compactSessionTool(
  compaction: () => CompactionService | undefined,
  resolveAgent: (id: string, signal: AbortSignal) => Promise<Session>,
): McpTool {
  const { $schema: _dialect, ...schema } = z.toJSONSchema(compactSessionInput, { io: 'input' }) as Record<string, unknown>
  return {
    name: 'compact_session',
    description: COMPACT_SESSION_DESCRIPTION,
    inputSchema: { ...schema, type: 'object' },
    async call(args, signal) {
      const input = parseInput('compact_session', compactSessionInput, args)
      const service = compaction()
      if (service === undefined)
        throw new McpError(
          'MCP_SERVICE_UNAVAILABLE',
          "This server's host has no 'compaction' service: it needs a model (DSH_API_KEY) to summarize.",
        )
      const session = await resolveAgent(input.session, signal)
      const result = await service.compact(session, { reason: 'mcp', signal, ...(input.keep === undefined ? {} : { keep: input.keep }) })
      return { result: { ...result } }
    },
  }
}
