import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { z } from 'zod'
import { TEXT_MAX_CHARS } from './limits.js'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const harnessSendMessageInputSchema = z.strictObject({
  subagent_id: z.string().min(1).max(ID_MAX_LENGTH).describe('The id the subagent tool returned for it.'),
  message: z.string().min(1).max(TEXT_MAX_CHARS).describe('What to tell it: more work, an answer, a correction.'),
})

export const harnessSendMessageDescription = [
  'Give one of your background subagents, by its id, a further turn in its own conversation.',
  'If it is busy, the message waits until its current turn is over, so it cannot redirect work already under way.',
  'You get a confirmation here, not its answer: that reaches you as a notice when it is done.',
  'An error means the message was not delivered.',
].join(' ')

export interface HarnessSendMessageResult extends ToolResult {
  readonly subagentId: string
  /** `started`: it took the message at once; `queued`: behind its running turn, at `position` (1 = next). */
  readonly status: 'started' | 'queued'
  readonly position?: number
}

/** The harness-dialect `send_message`: deliver a message to a continuable child (the runtime queues it on a busy one). */
export function createHarnessSendMessageTool(control: SubagentControl) {
  return defineTool({
    name: 'send_message',
    description: harnessSendMessageDescription,
    inputSchema: harnessSendMessageInputSchema,
    expected: '{ "subagent_id": string, "message": string }',
    async run(input, context): Promise<HarnessSendMessageResult> {
      const sent = await control.send(input.subagent_id, { caller: callerOf('send_message', context), text: input.message }, context.signal)
      return Object.freeze({
        text: `message queued as the next turn for subagent ${input.subagent_id}`,
        subagentId: input.subagent_id,
        status: sent.status,
        ...(sent.status === 'queued' ? { position: sent.position } : {}),
      })
    },
  })
}

export const harnessInterruptAgentInputSchema = z.strictObject({
  agent_id: z.string().min(1).max(ID_MAX_LENGTH).describe('The id of the subagent whose turn to stop.'),
})

export const harnessInterruptAgentDescription = [
  'Stop the turn a subagent is working on right now, by its id: one you started, or one started further down your tree.',
  'Messages you sent it that it has not begun are held, not dropped: your next send_message to it delivers them first, oldest first, then the new one.',
  'It stays available for send_message; background subagents it started stop along with its turn.',
  'The call returns once the stop is requested, so the target may take a moment to wind down; a target that is not running is left as it is.',
].join(' ')

export interface HarnessInterruptAgentResult extends ToolResult {
  readonly agentId: string
  readonly accepted: true
  /** Whether it had a turn in progress to stop (false: a no-op on a finished target). */
  readonly running: boolean
}

/**
 * The harness-dialect `interrupt_agent`: the runtime authorizes the caller
 * (the child's parent or an ancestor), requests the stop with the child's
 * queued input parked for the next `send_message`, and the tool returns
 * without waiting for the turn to end.
 */
export function createHarnessInterruptAgentTool(control: SubagentControl) {
  return defineTool({
    name: 'interrupt_agent',
    description: harnessInterruptAgentDescription,
    inputSchema: harnessInterruptAgentInputSchema,
    expected: '{ "agent_id": string }',
    async run(input, context): Promise<HarnessInterruptAgentResult> {
      const id = input.agent_id
      const running = await control.interrupt(id, { caller: callerOf('interrupt_agent', context), queued: 'park', until: 'requested' })
      return Object.freeze({ text: `interrupt requested for agent ${id}`, agentId: id, accepted: true as const, running })
    },
  })
}

export const harnessReportInputSchema = z.strictObject({
  output: z
    .string()
    .min(1)
    .max(20_000)
    .describe('What your parent should know, readable on its own: conclusions first, with the paths or ids it needs.'),
})

export const harnessReportDescription = [
  'Send content to the agent that started you (your parent): once before you finish, a self-contained final result, and earlier any finding that changes what it should do next.',
  'Your parent does not see your conversation, tool output or reasoning, so finishing your turn is not itself a report.',
  'Reporting does not end your turn, and only your direct parent receives it. A failed call may still have arrived, so do not repeat it blindly.',
].join(' ')

export interface HarnessReportResult extends ToolResult {
  readonly accepted: true
}

/** The harness-dialect `report`: a child's notice to its live parent. */
export function createHarnessReportTool(control: SubagentControl) {
  return defineTool({
    name: 'report',
    description: harnessReportDescription,
    inputSchema: harnessReportInputSchema,
    expected: '{ "output": string }',
    async run(input, context): Promise<HarnessReportResult> {
      control.report(callerOf('report', context), input.output)
      return Object.freeze({ text: 'report accepted by the agent that started you', accepted: true as const })
    },
  })
}
