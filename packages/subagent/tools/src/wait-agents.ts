import { ID_MAX_LENGTH } from '@dsh/protocol/limits'
import type { WaitEntry } from '@dsh/subagent'
import { z } from 'zod'
import { clipText, RESULT_TEXT_MAX_CHARS, shareBudget } from './limits.js'
import { callerOf, defineTool, type SubagentControl, type ToolResult } from './tool.js'

export const WAIT_AGENTS_TOOL_NAME = 'wait_agents'
/** The longest a model may ask to wait, in seconds. */
export const WAIT_AGENTS_MAX_SECONDS = 600

export const waitAgentsInputSchema = z.strictObject({
  ids: z
    .array(z.string().min(1).max(ID_MAX_LENGTH))
    .min(1)
    .max(32)
    .describe('The ids of the subagents to wait for (yours or your subagents’ own).'),
  timeout_seconds: z
    .number()
    .min(0)
    .max(WAIT_AGENTS_MAX_SECONDS)
    .exactOptional()
    .describe('How long to wait at most (default 60). Subagents still working then are reported as running.'),
})

export type WaitAgentsInput = z.output<typeof waitAgentsInputSchema>

export const waitAgentsDescription = [
  'Wait until the given subagents have finished their work (including queued messages), or until the timeout.',
  "Returns, for each, its final message and how it ended ('completed', 'error', 'cancelled', 'invalid-output', 'drained', 'interrupted', 'budget'), or that it is still running, closed, or unknown.",
].join(' ')

export interface WaitAgentsResult extends ToolResult {
  readonly agents: readonly WaitEntry[]
}

/** One line per agent (a settled one adds its final message, indented, below). */
export function renderWaitAgents(agents: readonly WaitEntry[]): string {
  return agents.map(renderWaitEntry).join('\n')
}

function renderWaitEntry(agent: WaitEntry): string {
  if (agent.state === 'running')
    return `${agent.id}  running${agent.queued > 0 ? ` (${agent.queued} queued)` : ''}  (not finished before the timeout)`
  if (agent.state === 'closed') return `${agent.id}  closed`
  if (agent.state === 'not-found') return `${agent.id}  not found (no such subagent)`
  const head = `${agent.id}  ${agent.reason ?? 'settled'}`
  const error = agent.error === undefined ? '' : `\n  error: ${agent.error}`
  const text = agent.text === undefined ? '\n  (no final message)' : `\n  ${agent.text.replaceAll('\n', '\n  ')}`
  return `${head}${error}${text}`
}

/**
 * The entries with their final messages and errors cut to share
 * `RESULT_TEXT_MAX_CHARS` between them (short ones whole, the rest equally);
 * a cut message's parsed `output` is left out.
 */
export function boundWaitEntries(agents: readonly WaitEntry[]): WaitEntry[] {
  const settled = agents.flatMap((agent) => (agent.state === 'settled' ? [agent] : []))
  const shares = shareBudget(
    settled.flatMap((agent) => [agent.text?.length ?? 0, agent.error?.length ?? 0]),
    RESULT_TEXT_MAX_CHARS,
  )
  let at = -2
  return agents.map((agent) => {
    if (agent.state !== 'settled') return agent
    at += 2
    const text = agent.text === undefined ? undefined : clipText(agent.text, shares[at]!)
    const error = agent.error === undefined ? undefined : clipText(agent.error, shares[at + 1]!)
    if (text === agent.text && error === agent.error) return agent
    const { text: _text, error: _error, output, ...rest } = agent
    return Object.freeze({
      ...rest,
      ...(error === undefined ? {} : { error }),
      ...(text === undefined ? {} : { text }),
      ...(output === undefined || text !== agent.text ? {} : { output }),
    })
  })
}

/** The `wait_agents` tool: wait for children to settle, with a timeout. */
export function createWaitAgentsTool(control: SubagentControl) {
  return defineTool({
    name: WAIT_AGENTS_TOOL_NAME,
    description: waitAgentsDescription,
    inputSchema: waitAgentsInputSchema,
    expected: '{ "ids": [string, ...], "timeout_seconds"?: number (0-600) }',
    async run(input, context): Promise<WaitAgentsResult> {
      const waited = await control.wait(input.ids, {
        caller: callerOf(WAIT_AGENTS_TOOL_NAME, context),
        ...(input.timeout_seconds === undefined ? {} : { timeoutMs: input.timeout_seconds * 1000 }),
        ...(context.signal === undefined ? {} : { signal: context.signal }),
      })
      const agents = boundWaitEntries(waited)
      return Object.freeze({ text: renderWaitAgents(agents), agents: Object.freeze(agents) })
    },
  })
}
