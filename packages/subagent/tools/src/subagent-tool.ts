import { agentDefinitions } from '@dsh/agent-definitions'
import { isDshError } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import type { SubagentBudget, SubagentBudgetExceeded, SubagentEndReason, SubagentSettings } from '@dsh/subagent'
import { z } from 'zod'
import { type AgentDefinitionSource, definedSpawn } from './agent-definition.js'
import { budgetText, subagentBudgetInputSchema, withBudget } from './budget-input.js'
import {
  clipText,
  NAME_MAX_CHARS,
  outputSchemaFault,
  PERSONA_MAX_CHARS,
  RESULT_TEXT_MAX_CHARS,
  TEXT_MAX_CHARS,
  TOOL_NAMES_MAX,
} from './limits.js'
import { awaitChild, callerOf, defineTool, labelText, type SubagentControl, type ToolResult } from './tool.js'

export const SUBAGENT_TOOL_NAME = 'subagent'

const toolNames = z.array(z.string().min(1).max(NAME_MAX_CHARS)).max(TOOL_NAMES_MAX)

export const subagentInputSchema = z
  .strictObject({
    prompt: z
      .string()
      .min(1)
      .max(TEXT_MAX_CHARS)
      .describe(
        "The task. A 'fresh' subagent sees nothing of your conversation, so include everything it needs: goal, files, constraints, what to return.",
      ),
    label: z
      .string()
      .min(1)
      .max(80)
      .exactOptional()
      .describe(
        "A short name for the subagent (a few words). Required when mode is 'continuable' (with agent, it defaults to the agent's name).",
      ),
    agent: z
      .string()
      .min(1)
      .max(64)
      .exactOptional()
      .describe(
        'The name of a defined agent to start: its instructions, model, tools and budgets apply. Inline instructions are added to its own; inline tools may only narrow its tools.',
      ),
    mode: z
      .enum(['one-shot', 'continuable'])
      .exactOptional()
      .describe(
        "'one-shot' (default): runs once and returns its result. 'continuable': keeps its conversation; you can send_message it more work later.",
      ),
    context: z
      .enum(['fresh', 'fork'])
      .exactOptional()
      .describe("'fresh' (default): an empty conversation. 'fork': starts from a copy of your conversation so far."),
    wait: z
      .boolean()
      .exactOptional()
      .describe(
        'One-shot only. true (default): wait and return its final result. false: return its id at once; collect the result later with wait_agents.',
      ),
    instructions: z
      .string()
      .min(1)
      .max(TEXT_MAX_CHARS)
      .exactOptional()
      .describe('Extra standing instructions for the subagent (appended to its system prompt).'),
    persona: z
      .string()
      .min(1)
      .max(PERSONA_MAX_CHARS)
      .exactOptional()
      .describe('Who the subagent should be (replaces the default persona), e.g. "a meticulous security reviewer".'),
    model: z.string().min(1).max(NAME_MAX_CHARS).exactOptional().describe('The model to run it on; omit to use the default.'),
    tools: z
      .strictObject({
        allow: toolNames.exactOptional().describe('Only these tools.'),
        deny: toolNames.exactOptional().describe('Not these tools.'),
      })
      .exactOptional()
      .describe('Limit the tools the subagent may call.'),
    outputSchema: z
      .record(z.string(), z.unknown())
      .superRefine((schema, ctx) => {
        const fault = outputSchemaFault(schema)
        if (fault !== undefined) ctx.addIssue({ code: 'custom', message: `the schema ${fault}; give a simpler one` })
      })
      .exactOptional()
      .describe('One-shot only: a JSON Schema its final message must match (as JSON). A mismatch is reported as an error in the result.'),
    budget: subagentBudgetInputSchema.exactOptional(),
  })
  .superRefine((input, ctx) => {
    if (input.mode === 'continuable' && input.label === undefined && input.agent === undefined)
      ctx.addIssue({ code: 'custom', path: ['label'], message: 'a continuable subagent needs a label' })
    if (input.mode === 'continuable' && input.wait !== undefined)
      ctx.addIssue({ code: 'custom', path: ['wait'], message: 'only a one-shot subagent can be waited for here; use wait_agents' })
    if (input.mode === 'continuable' && input.outputSchema !== undefined)
      ctx.addIssue({ code: 'custom', path: ['outputSchema'], message: 'outputSchema applies to one-shot subagents' })
    if (input.tools !== undefined && input.tools.allow === undefined && input.tools.deny === undefined)
      ctx.addIssue({ code: 'custom', path: ['tools'], message: 'give allow and/or deny' })
  })

export type SubagentToolInput = z.output<typeof subagentInputSchema>

export const subagentToolDescription = [
  'Start a subagent: a child agent with its own conversation that works on a task for you.',
  'A one-shot subagent runs once; by default you wait for it and get its final result (with wait: false you get its id and collect the result with wait_agents).',
  'A continuable subagent returns its id at once and keeps running in the background; give it more work with send_message, and close it with close_agent when done.',
  'Its settlement (and any report it sends) also reaches you as a notice at the start of your next turn.',
  'If you are a continuable subagent yourself, each settlement of a subagent you started wakes you for another turn even after you have answered; if you are a one-shot one, the subagents you started are stopped when you give your final answer, so wait_agents for them first.',
].join(' ')

export interface SubagentToolResult extends ToolResult {
  readonly id: SessionId
  readonly mode: 'one-shot' | 'continuable'
  readonly label?: string
  /** The definition it was started from, when the call named one. */
  readonly agent?: string
  /** `running` when not awaited; else how it ended. */
  readonly status: 'running' | SubagentEndReason
  /** The final message of an awaited one-shot run. */
  readonly result?: string
  /** The parsed result, when an `outputSchema` was given and matched. */
  readonly output?: unknown
  readonly error?: { readonly code: string; readonly message: string }
  /** The budget it runs under, as the runtime recorded it (lowered to what was left of yours). */
  readonly budget?: SubagentBudget
  /** On status `budget`: which budget was used up, whose, its limit and what was spent. */
  readonly exceeded?: SubagentBudgetExceeded
}

export function renderSubagentResult(result: Omit<SubagentToolResult, 'text'>): string {
  const who = `${result.id} (${result.mode} ${labelText(result.label)})`
  const budget = result.budget === undefined ? '' : `\n${budgetText(result.budget)}`
  if (result.status === 'running') {
    return result.mode === 'continuable'
      ? `Started ${who}. It runs in the background; use send_message to give it more work, wait_agents to collect its result, close_agent when done.${budget}`
      : `Started ${who}. Collect its result with wait_agents.${budget}`
  }
  const lines = [`${who} ${result.status}.`]
  if (result.error !== undefined) lines.push(`Error ${result.error.code}: ${result.error.message}`)
  if (result.result !== undefined) lines.push(`Result:\n${result.result}`)
  return lines.join('\n')
}

function errorBody(error: unknown): { code: string; message: string } {
  const message = error instanceof Error ? error.message : String(error)
  return { code: isDshError(error) ? error.code : 'SUBAGENT_RUN_FAILED', message: clipText(message, RESULT_TEXT_MAX_CHARS) }
}

export interface SubagentToolOptions {
  /** Written into the descriptor of every child it starts. */
  readonly provider?: string
  /** The definitions `agent: <name>` names (without them, a call naming an agent is `AGENT_NOT_FOUND`). */
  readonly agents?: AgentDefinitionSource
}

/** The inline settings of a call without `agent`. */
function inlineSettings(input: SubagentToolInput): SubagentSettings {
  return {
    ...(input.instructions === undefined ? {} : { instructions: input.instructions }),
    ...(input.persona === undefined ? {} : { persona: input.persona }),
    ...(input.model === undefined ? {} : { model: input.model }),
    ...(input.tools === undefined ? {} : { toolFilter: input.tools }),
  }
}

/**
 * The `subagent` tool: start a child (one-shot awaited, or continuable
 * returned at once); `provider`, when given, goes into its descriptor. With
 * `agent: <name>` the definition is read and validated whole before the child
 * exists, so a missing or invalid definition fails the call (its typed
 * `AGENT_*` error) and leaves no child behind; so does one asking for a
 * provider or a tool that `agents.offers` says children here do not get
 * (`AGENT_DEFINITION_UNSUPPORTED`).
 */
export function createSubagentTool(control: SubagentControl, options: SubagentToolOptions = {}) {
  return defineTool({
    name: SUBAGENT_TOOL_NAME,
    description: subagentToolDescription,
    inputSchema: subagentInputSchema,
    expected:
      '{ "prompt": string, "agent"?: string, "label"?: string, "mode"?: "one-shot" | "continuable", "context"?: "fresh" | "fork", "wait"?: boolean, ... }',
    async run(input, context): Promise<SubagentToolResult> {
      const mode = input.mode ?? 'one-shot'
      const caller = callerOf(SUBAGENT_TOOL_NAME, context)
      const defined =
        input.agent === undefined
          ? undefined
          : definedSpawn(await (options.agents ?? agentDefinitions({})).get(input.agent, context.signal), input, options.agents?.offers)
      const label = defined?.label ?? input.label
      const settings: SubagentSettings = {
        ...withBudget(defined?.settings ?? inlineSettings(input), input.budget),
        // Tool input arrives as parsed JSON, so the schema is lossless JSON; the runtime re-checks it strictly.
        ...(input.outputSchema === undefined ? {} : { outputSchema: input.outputSchema as NonNullable<SubagentSettings['outputSchema']> }),
      }
      const handle = control.spawn(caller, {
        mode,
        context: input.context ?? 'fresh',
        prompt: input.prompt,
        ...(label === undefined ? {} : { label }),
        ...(options.provider === undefined ? {} : { provider: options.provider }),
        ...(Object.keys(settings).length === 0 ? {} : { settings }),
        ...(defined === undefined ? {} : { agentPreset: defined.agentPreset }),
      })
      const base = {
        id: handle.id,
        mode,
        ...(label === undefined ? {} : { label }),
        ...(input.agent === undefined ? {} : { agent: input.agent }),
        ...(handle.budget === undefined ? {} : { budget: handle.budget }),
      }
      if (mode === 'continuable' || input.wait === false) {
        const started = { ...base, status: 'running' as const }
        return Object.freeze({ text: renderSubagentResult(started), ...started })
      }
      const settled = await awaitChild(control, handle, context.signal)
      // A result past the bound is cut; its parsed output, as large, is then left out too.
      const result = settled.text === undefined ? undefined : clipText(settled.text, RESULT_TEXT_MAX_CHARS)
      const finished = {
        ...base,
        status: settled.end,
        ...(result === undefined ? {} : { result }),
        ...(settled.output === undefined || result !== settled.text ? {} : { output: settled.output }),
        ...(settled.error === undefined || settled.end === 'completed' ? {} : { error: errorBody(settled.error) }),
        ...(settled.exceeded === undefined ? {} : { exceeded: settled.exceeded }),
      }
      return Object.freeze({ text: renderSubagentResult(finished), ...finished })
    },
  })
}
