import { isDshError } from '@dsh/context'
import type { JsonValue, Session } from '@dsh/session'
import type { SubagentTool } from '@dsh/subagent'
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions'
import type { FunctionTool } from 'openai/resources/responses/responses'
import { TOOL_RESULT_MAX_BYTES } from './limits.js'

/**
 * A tool the runtime gives an agent: `SubagentTool` of `@dsh/subagent` (the
 * subagent-control tools have this shape), the one declaration of it.
 */
export type AgentTool = SubagentTool

/** What a tool run leaves in the log (`tool/result`); the model reads it as the context renders it (its `text`, an error's code and message, else its JSON). */
export interface ToolOutcome {
  readonly content: JsonValue
  readonly isError: boolean
}

/** The `tools` request parameter; JSON Schema keys the API does not accept (`$schema`) are dropped. */
export function toolDefinitions(tools: readonly AgentTool[]): ChatCompletionFunctionTool[] {
  return tools.map((tool) => {
    const { $schema: _ignored, ...parameters } = tool.jsonSchema as Record<string, unknown>
    return { type: 'function', function: { name: tool.name, description: tool.description, parameters } }
  })
}

/** The same tools as Responses function tools (`{type, name, description, parameters}`, not strict: the schemas are the tools' own). */
export function responsesTools(tools: readonly ChatCompletionFunctionTool[]): FunctionTool[] {
  return tools.map(({ function: fn }) => ({
    type: 'function',
    name: fn.name,
    ...(fn.description === undefined ? {} : { description: fn.description }),
    parameters: (fn.parameters ?? null) as FunctionTool['parameters'],
    strict: false,
  }))
}

/**
 * Runs one model-requested call. Never rejects: an unknown tool, arguments
 * that are not JSON, and a tool's own typed error all become an error result
 * the model can read and correct — the turn goes on.
 */
export async function runTool(
  tools: readonly AgentTool[],
  name: string,
  rawArguments: string,
  agent: Session,
  signal: AbortSignal,
): Promise<ToolOutcome> {
  const tool = tools.find((candidate) => candidate.name === name)
  if (tool === undefined) {
    const known = tools.map((candidate) => candidate.name).join(', ') || '(none)'
    return failure('TOOL_UNKNOWN', `There is no tool named ${JSON.stringify(name)}. Available tools: ${known}.`)
  }
  let input: unknown
  try {
    input = rawArguments.trim().length === 0 ? {} : JSON.parse(rawArguments)
  } catch {
    return failure('TOOL_INVALID_ARGUMENTS', `The arguments for ${name} are not valid JSON; send one JSON object.`)
  }
  try {
    return resultOf(name, await tool.execute(input, { agent, signal }))
  } catch (error) {
    if (isDshError(error)) return failure(error.code, error.message)
    return failure('TOOL_FAILED', error instanceof Error ? error.message : String(error))
  }
}

function failure(code: string, message: string): ToolOutcome {
  return { content: { code, message }, isError: true }
}

/**
 * A tool's result as its `tool/result` logs it (see `toJson`). A result whose
 * JSON is over `TOOL_RESULT_MAX_BYTES` is an error result instead, which the
 * model reads and the turn goes on: logged whole it would be an event no store
 * takes, and the session could store nothing after it.
 */
function resultOf(name: string, result: unknown): ToolOutcome {
  const text = jsonText(result)
  if (text === undefined) return failure('TOOL_FAILED', `${name} returned a value that is not JSON (a function or a symbol).`)
  // A UTF-16 code unit is at most 3 UTF-8 bytes: only a text that could be over the bound is measured.
  const bytes = text.length * 3 > TOOL_RESULT_MAX_BYTES ? Buffer.byteLength(text) : 0
  if (bytes > TOOL_RESULT_MAX_BYTES) {
    return failure(
      'TOOL_RESULT_TOO_LARGE',
      `${name} returned ${bytes} bytes of JSON; a tool result is at most ${TOOL_RESULT_MAX_BYTES} bytes (TOOL_RESULT_MAX_BYTES). Ask for less (a narrower query, a range, a summary).`,
    )
  }
  return { content: JSON.parse(text) as JsonValue, isError: false }
}

/** A lossless-JSON copy (drops `undefined`, turns non-finite numbers into null). */
export function toJson(value: unknown): JsonValue {
  const text = jsonText(value)
  return text === undefined ? null : (JSON.parse(text) as JsonValue)
}

/** The JSON text of `toJson`'s copy; undefined for `undefined`, a function or a symbol. */
function jsonText(value: unknown): string | undefined {
  if (value === undefined) return undefined
  return JSON.stringify(value, (_key, inner: unknown) => (typeof inner === 'number' && !Number.isFinite(inner) ? null : inner))
}

/** The arguments as logged in `tool/call`: the parsed object, or the raw text when it is not JSON. */
export function loggedArguments(rawArguments: string): JsonValue {
  if (rawArguments.trim().length === 0) return {}
  try {
    return toJson(JSON.parse(rawArguments))
  } catch {
    return rawArguments
  }
}
