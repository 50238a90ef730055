import { raceAbort } from '@dsh/context'
import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { z } from 'zod'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const INTERRUPT_AGENT_TOOL_NAME = 'interrupt_agent'

export const interruptAgentInputSchema = z.strictObject({
  id: z.string().min(1).max(ID_MAX_LENGTH).describe('The id of a subagent of yours (or of one of your subagents).'),
})

export const interruptAgentDescription =
  'Stop what a subagent is doing right now: its current turn ends as cancelled. A continuable subagent stays available (messages already queued are still delivered, and subagents it started keep running and wake it when they finish); a one-shot one has ended, and subagents it started stop with it. Use close_agent to end a continuable one for good.'

export interface InterruptAgentResult extends ToolResult {
  readonly id: string
  /** False when it was not running. */
  readonly interrupted: boolean
}

export function renderInterruptAgent(result: Omit<InterruptAgentResult, 'text'>): string {
  return result.interrupted ? `${result.id} was interrupted.` : `${result.id} was not running; nothing to interrupt.`
}

/** The `interrupt_agent` tool: only the child's parent or an ancestor may use it on the child. */
export function createInterruptAgentTool(control: SubagentControl) {
  return defineTool({
    name: INTERRUPT_AGENT_TOOL_NAME,
    description: interruptAgentDescription,
    inputSchema: interruptAgentInputSchema,
    expected: '{ "id": string }',
    async run(input, context): Promise<InterruptAgentResult> {
      // The stop is requested at once; only the wait for the turn to end gives way to the caller's cancellation.
      const interrupted = await raceAbort(
        control.interrupt(input.id, { caller: callerOf(INTERRUPT_AGENT_TOOL_NAME, context) }),
        context.signal,
      )
      const result = { id: input.id, interrupted }
      return Object.freeze({ text: renderInterruptAgent(result), ...result })
    },
  })
}
