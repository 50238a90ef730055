import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { z } from 'zod'
import { TEXT_MAX_CHARS } from './limits.js'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const SEND_MESSAGE_TOOL_NAME = 'send_message'

export const sendMessageInputSchema = z.strictObject({
  id: z.string().min(1).max(ID_MAX_LENGTH).describe('The id of one of your continuable subagents (from subagent or list_agents).'),
  message: z.string().min(1).max(TEXT_MAX_CHARS).describe('What to tell it: new work, an answer, a correction.'),
})

export type SendMessageInput = z.output<typeof sendMessageInputSchema>

export const sendMessageDescription = [
  'Send a message to one of your continuable subagents.',
  'If it is idle, it starts working on the message at once; if it is busy, the message is queued and delivered, in order, when its current turn ends.',
  'Use wait_agents to collect what it answers.',
].join(' ')

export interface SendMessageResult extends ToolResult {
  readonly id: string
  readonly status: 'started' | 'queued'
  /** Place in the queue (1 = next) when queued. */
  readonly position?: number
}

export function renderSendMessage(result: Omit<SendMessageResult, 'text'>): string {
  return result.status === 'started'
    ? `${result.id} is working on your message.`
    : `${result.id} is busy; your message is queued (position ${result.position}) and will be delivered when its current turn ends.`
}

/** The `send_message` tool: deliver input to a continuable child; a busy child queues it. */
export function createSendMessageTool(control: SubagentControl) {
  return defineTool({
    name: SEND_MESSAGE_TOOL_NAME,
    description: sendMessageDescription,
    inputSchema: sendMessageInputSchema,
    expected: '{ "id": string, "message": string }',
    async run(input, context): Promise<SendMessageResult> {
      const sent = await control.send(input.id, { caller: callerOf(SEND_MESSAGE_TOOL_NAME, context), text: input.message }, context.signal)
      const result =
        sent.status === 'queued'
          ? { id: input.id, status: 'queued' as const, position: sent.position }
          : { id: input.id, status: 'started' as const }
      return Object.freeze({ text: renderSendMessage(result), ...result })
    },
  })
}
