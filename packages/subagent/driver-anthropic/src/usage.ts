import type { StepFinish, TokenUsage } from '@dsh/session'

/**
 * Token usage in dsh's disjoint kinds: `input` is input tokens neither read
 * from nor written to the prompt cache, `cacheRead` those read, `cacheWrite`
 * those written, `output` visible output tokens, `reasoning` thinking
 * tokens. Each token is in exactly one kind, so kinds add up and a price
 * table prices each once (a cache write costs more than plain input).
 */
export interface AnthropicUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly reasoning: number
}

export const NO_USAGE: AnthropicUsage = Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 })

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined
}

/**
 * The raw usage of one call from its stream: `message_start`'s usage, each
 * count overridden by a later `message_delta` that carries it (the delta's
 * counts are cumulative; a `null` leaves the earlier one).
 */
export function mergeRawUsage(earlier: Record<string, unknown> | undefined, later: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = { ...earlier }
  if (typeof later !== 'object' || later === null) return out
  for (const [key, value] of Object.entries(later)) if (value !== null && value !== undefined) out[key] = value
  return out
}

/**
 * Maps a Messages `usage` object to disjoint counts. The API's input counts
 * are already disjoint: `input_tokens` (after the last cache breakpoint),
 * `cache_read_input_tokens`, `cache_creation_input_tokens`. Its
 * `output_tokens` include the thinking tokens
 * (`output_tokens_details.thinking_tokens`), so `output` = `output_tokens` −
 * `reasoning`. A count that is missing or not a non-negative integer is 0;
 * a thinking count above the output count is ignored.
 */
export function usageFromMessages(raw: unknown): AnthropicUsage {
  const count = (name: string): number => {
    const value = field(raw, name)
    return isCount(value) ? value : 0
  }
  const output = count('output_tokens')
  const thinking = field(field(raw, 'output_tokens_details'), 'thinking_tokens')
  const reasoning = isCount(thinking) && thinking <= output ? thinking : 0
  return {
    input: count('input_tokens'),
    output: output - reasoning,
    cacheRead: count('cache_read_input_tokens'),
    cacheWrite: count('cache_creation_input_tokens'),
    reasoning,
  }
}

/** A usage as `step/end` and `assistant/message` record it (zero kinds other than input and output left out). */
export function tokenUsage(usage: AnthropicUsage): TokenUsage {
  return {
    input: usage.input,
    output: usage.output,
    ...(usage.cacheRead === 0 ? {} : { cacheRead: usage.cacheRead }),
    ...(usage.cacheWrite === 0 ? {} : { cacheWrite: usage.cacheWrite }),
    ...(usage.reasoning === 0 ? {} : { reasoning: usage.reasoning }),
  }
}

/** The sum of two usages, kind by kind. */
export function addUsage(a: AnthropicUsage, b: AnthropicUsage): AnthropicUsage {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    reasoning: a.reasoning + b.reasoning,
  }
}

/**
 * Why a step stopped, from the Messages `stop_reason`: `max_tokens` (or
 * `model_context_window_exceeded`) → `max-tokens`; `tool_use`, or any reason
 * on a step that called tools → `tool-calls`; anything else (`end_turn`,
 * `stop_sequence`, `refusal`, `pause_turn`, none) → `stop`.
 */
export function finishOf(reason: string | undefined, calledTools: boolean): StepFinish {
  if (reason === 'max_tokens' || reason === 'model_context_window_exceeded') return 'max-tokens'
  if (reason === 'tool_use' || calledTools) return 'tool-calls'
  return 'stop'
}
