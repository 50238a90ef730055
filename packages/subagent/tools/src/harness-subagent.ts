import { isDshError } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import type { SubagentEndReason, SubagentSettlement } from '@dsh/subagent'
import { z } from 'zod'
import { ToolSubagentControlError } from './errors.js'
import { clipText, NAME_MAX_CHARS, RESULT_TEXT_MAX_CHARS, TEXT_MAX_CHARS } from './limits.js'
import { awaitChild, callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const harnessSubagentInputSchema = z.strictObject({
  description: z
    .string()
    .min(1)
    .max(NAME_MAX_CHARS)
    .describe("A few words (three to five) naming the task; it becomes the subagent's label in listings."),
  prompt: z
    .string()
    .min(1)
    .max(TEXT_MAX_CHARS)
    .describe('The whole task, self-contained: the subagent starts with an empty conversation and sees nothing of yours.'),
  run_in_background: z
    .boolean()
    .exactOptional()
    .describe('true (default): get its id at once and hear how it ended later. false: wait here for its final answer.'),
})

export type HarnessSubagentInput = z.output<typeof harnessSubagentInputSchema>

export const harnessSubagentDescription = [
  'Hand a self-contained task to a subagent: a separate agent with a fresh conversation of its own, so the prompt must carry everything it needs.',
  'By default it works in the background: this call returns its id at once, and when it is done you receive a notice with how it ended and its last message.',
  'send_message gives it a further turn in the same conversation. Start independent subagents together and carry on with your own work meanwhile.',
  'Set run_in_background to false only when your very next step needs the answer: the call then waits and returns what the subagent answered.',
  'A subagent started with run_in_background false gives one answer and is not woken after it: background subagents it started are stopped when it answers, so if you were started that way, start yours with run_in_background false.',
].join(' ')

/** What the harness `subagent` tool resolves: a background start, or a waited-for answer. */
export type HarnessSubagentResult = ToolResult &
  (
    | { readonly kind: 'continuable'; readonly subagentId: SessionId }
    | { readonly kind: 'foreground'; readonly runId: SessionId; readonly output: string }
  )

const UNFINISHED: Partial<Record<SubagentEndReason, string>> = {
  cancelled: 'was stopped before it finished',
  interrupted: 'was stopped before it finished',
  error: 'failed before it finished',
  drained: 'was stopped because the session that started it went away',
  'invalid-output': 'ended with an answer that did not match its schema',
  closed: 'was closed before it finished',
  budget: 'was stopped because it used up its budget',
}

/** The failure a waiting caller gets when its subagent did not complete: why, the detail, and what it had written. */
function unfinished(id: SessionId, settled: SubagentSettlement): ToolSubagentControlError {
  const lines = [`Subagent ${id} ${UNFINISHED[settled.end] ?? `ended '${settled.end}' before it finished`}.`]
  if (settled.error !== undefined) lines.push(`Detail: ${clipText(describe(settled.error), RESULT_TEXT_MAX_CHARS)}`)
  if (settled.text !== undefined && settled.text.length > 0)
    lines.push(`What it had written before it ended:\n${clipText(settled.text, RESULT_TEXT_MAX_CHARS)}`)
  return new ToolSubagentControlError('TOOL_SUBAGENT_CONTROL_SUBAGENT_FAILED', lines.join('\n'), {
    details: { id, reason: settled.end },
  })
}

function describe(error: unknown): string {
  if (isDshError(error)) return `${error.code}: ${error.message}`
  return error instanceof Error ? error.message : String(error)
}

/**
 * The harness-dialect `subagent` tool: `description` is the label, the child
 * starts from a fresh conversation, `provider` (when given) is written into
 * its descriptor. In the background (the default) it is a continuable child
 * whose settlement reaches the parent as a `subagent/notice`; waited for, it
 * is a one-shot child whose final text is the result.
 */
export function createHarnessSubagentTool(control: SubagentControl, options: { readonly provider?: string } = {}) {
  return defineTool({
    name: 'subagent',
    description: harnessSubagentDescription,
    inputSchema: harnessSubagentInputSchema,
    expected: '{ "description": string, "prompt": string, "run_in_background"?: boolean }',
    async run(input, context): Promise<HarnessSubagentResult> {
      const background = input.run_in_background ?? true
      const handle = control.spawn(callerOf('subagent', context), {
        mode: background ? 'continuable' : 'one-shot',
        label: input.description,
        context: 'fresh',
        prompt: input.prompt,
        ...(options.provider === undefined ? {} : { provider: options.provider }),
      })
      if (background) return Object.freeze({ text: `started subagent ${handle.id}`, kind: 'continuable' as const, subagentId: handle.id })
      const settled = await awaitChild(control, handle, context.signal)
      if (settled.end !== 'completed') throw unfinished(handle.id, settled)
      const output = clipText(settled.text ?? '', RESULT_TEXT_MAX_CHARS)
      return Object.freeze({ text: output, kind: 'foreground' as const, runId: handle.id, output })
    },
  })
}
