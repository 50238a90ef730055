import { raceAbort } from '@dsh/context'
import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { z } from 'zod'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const CLOSE_AGENT_TOOL_NAME = 'close_agent'

export const closeAgentInputSchema = z.strictObject({
  id: z.string().min(1).max(ID_MAX_LENGTH).describe('The id of a continuable subagent you no longer need.'),
})

export const closeAgentDescription =
  'Close a continuable subagent for good: a running turn is interrupted, queued messages are dropped, subagents it started are stopped, and it can no longer receive messages.'

export interface CloseAgentResult extends ToolResult {
  readonly id: string
  readonly interrupted: boolean
  readonly dropped: number
}

export function renderCloseAgent(result: Omit<CloseAgentResult, 'text'>): string {
  const parts = [`${result.id} is closed.`]
  if (result.interrupted) parts.push('Its running turn was interrupted.')
  if (result.dropped > 0) parts.push(`${result.dropped} queued message${result.dropped === 1 ? ' was' : 's were'} dropped.`)
  return parts.join(' ')
}

/** The `close_agent` tool: settle and close a continuable child (parent or ancestor only). */
export function createCloseAgentTool(control: SubagentControl) {
  return defineTool({
    name: CLOSE_AGENT_TOOL_NAME,
    description: closeAgentDescription,
    inputSchema: closeAgentInputSchema,
    expected: '{ "id": string }',
    async run(input, context): Promise<CloseAgentResult> {
      // The close goes ahead; only the wait for a running turn to end gives way to the caller's cancellation.
      const closed = await raceAbort(
        control.close(input.id, { caller: callerOf(CLOSE_AGENT_TOOL_NAME, context) }, context.signal),
        context.signal,
      )
      const result = { id: closed.id, interrupted: closed.interrupted, dropped: closed.dropped }
      return Object.freeze({ text: renderCloseAgent(result), ...result })
    },
  })
}
