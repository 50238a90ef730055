import { textHead, throwIfAborted } from '@dsh/context'
import type { Session } from '@dsh/session'
import type { SubagentHandle, SubagentRuntime, SubagentSettlement } from '@dsh/subagent'
import { z } from 'zod'
import { ToolSubagentControlError } from './errors.js'

/** What the control tools drive: the `subagents` service (a `SubagentRuntime`). */
export type SubagentControl = Pick<
  SubagentRuntime,
  'spawn' | 'send' | 'wait' | 'interrupt' | 'close' | 'report' | 'explainChildren' | 'explainDescendants' | 'queuedCount' | 'isRunning'
>

/** The calling agent: its live session (or, for listing only, anything with its id). */
export interface ToolExecuteContext {
  readonly agent: Session | { readonly id: string }
  readonly signal?: AbortSignal
}

/** Every tool result: the text a model reads plus structured fields. */
export interface ToolResult {
  readonly text: string
}

/**
 * One model-visible tool: strict zod input, its JSON Schema, a description a
 * model can act on, and `execute(input, { agent, signal })`.
 */
export interface SubagentControlTool<Name extends string = string, Input = unknown, Result extends ToolResult = ToolResult> {
  readonly name: Name
  readonly description: string
  readonly inputSchema: z.ZodType<Input>
  /** The JSON Schema handed to the model (draft 2020-12, as `z.toJSONSchema` emits it). */
  readonly jsonSchema: Readonly<Record<string, unknown>>
  execute(input: unknown, context: ToolExecuteContext): Promise<Result>
}

/**
 * Parses untrusted tool input; a mismatch is `TOOL_SUBAGENT_CONTROL_INVALID_INPUT`
 * naming every problem and what was expected.
 */
export function parseToolInput<T>(name: string, schema: z.ZodType<T>, input: unknown, expected: string): T {
  const parsed = schema.safeParse(input ?? {})
  if (parsed.success) return parsed.data
  // The input's own keys and values show up in issues: the message names a few, each cut short, however large the input.
  const { issues } = parsed.error
  const shown = issues
    .slice(0, ISSUES_SHOWN)
    .map((issue) => ({ path: issue.path.map((key) => clip(String(key))), message: clip(issue.message) }))
  const problems = shown.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'input'}: ${issue.message}`)
  const more = issues.length > ISSUES_SHOWN ? `; and ${issues.length - ISSUES_SHOWN} more` : ''
  throw new ToolSubagentControlError(
    'TOOL_SUBAGENT_CONTROL_INVALID_INPUT',
    `${name} input is invalid (${problems.join('; ')}${more}). Expected ${expected}.`,
    { details: { issues: shown, count: issues.length } },
  )
}

/** How many of an input's problems an error names. */
const ISSUES_SHOWN = 8
/** Longest path or message of one problem an error names. */
const ISSUE_MAX_CHARS = 200

function clip(text: string): string {
  if (text.length <= ISSUE_MAX_CHARS) return text
  const head = textHead(text, ISSUE_MAX_CHARS)
  return `${head}… (${text.length - head.length} more characters)`
}

/** The calling agent's id; `TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT` without one. */
export function agentIdOf(name: string, context: ToolExecuteContext | undefined): string {
  const id = context?.agent?.id
  if (typeof id !== 'string' || id.length === 0) {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT',
      `${name} needs the calling agent (context.agent with a non-empty id).`,
    )
  }
  return id
}

/** The caller as the runtime takes it: the live Session object when given one (identity-checked), else its id. */
export function callerOf(name: string, context: ToolExecuteContext | undefined): Session | string {
  const id = agentIdOf(name, context)
  const agent = context!.agent
  return 'header' in agent && 'append' in agent ? (agent as Session) : id
}

/** Declares a tool from its parts; the JSON Schema is derived once from the zod schema. */
export function defineTool<Name extends string, Input, Result extends ToolResult>(parts: {
  readonly name: Name
  readonly description: string
  readonly inputSchema: z.ZodType<Input>
  readonly expected: string
  run(input: Input, context: ToolExecuteContext): Promise<Result>
}): SubagentControlTool<Name, Input, Result> {
  const jsonSchema = z.toJSONSchema(parts.inputSchema) as Record<string, unknown>
  return Object.freeze({
    name: parts.name,
    description: parts.description,
    inputSchema: parts.inputSchema,
    jsonSchema,
    async execute(input: unknown, context: ToolExecuteContext): Promise<Result> {
      const parsed = parseToolInput(parts.name, parts.inputSchema, input, parts.expected)
      agentIdOf(parts.name, context)
      // A call that arrives after its turn was cancelled starts, sends or stops nothing.
      throwIfAborted(context.signal)
      return parts.run(parsed, context)
    },
  })
}

/** Waits for a child's run the caller started; if the caller's own turn is cancelled meanwhile, the child is interrupted too. */
export async function awaitChild(
  control: SubagentControl,
  handle: SubagentHandle,
  signal: AbortSignal | undefined,
): Promise<SubagentSettlement> {
  const onAbort = (): void => void control.interrupt(handle.id)
  signal?.addEventListener('abort', onAbort, { once: true })
  if (signal?.aborted) onAbort()
  return handle.done.finally(() => signal?.removeEventListener('abort', onAbort))
}

/** A quoted label, or `(no label)`. */
export function labelText(label: string | undefined): string {
  return label === undefined ? '(no label)' : JSON.stringify(label)
}
