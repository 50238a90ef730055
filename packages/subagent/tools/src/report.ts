import { z } from 'zod'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const REPORT_TOOL_NAME = 'report'

export const reportInputSchema = z.strictObject({
  message: z.string().min(1).max(20_000).describe('What your parent should know now: progress, a finding, a question.'),
})

export const reportDescription =
  'Send a message to the agent that started you (your parent) while you keep working. It reaches your parent as a notice at the start of its next turn. Only subagents have a parent.'

export interface ReportResult extends ToolResult {
  readonly delivered: true
}

/** The `report` tool: a child's notice to its parent. */
export function createReportTool(control: SubagentControl) {
  return defineTool({
    name: REPORT_TOOL_NAME,
    description: reportDescription,
    inputSchema: reportInputSchema,
    expected: '{ "message": string }',
    async run(input, context): Promise<ReportResult> {
      control.report(callerOf(REPORT_TOOL_NAME, context), input.message)
      return Object.freeze({ text: 'Reported to your parent.', delivered: true as const })
    },
  })
}
