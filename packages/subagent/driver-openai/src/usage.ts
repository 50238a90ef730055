import type { StepFinish, TokenUsage } from '@dsh/session'

/**
 * Token usage in dsh's disjoint kinds: `input` is prompt tokens not read
 * from the provider's cache, `cacheRead` those that were, `output` visible
 * completion tokens, `reasoning` hidden reasoning tokens. Each token is in
 * exactly one kind, so kinds add up and a price table prices each once.
 */
export interface ResponseUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly reasoning: number
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0

function detail(value: unknown, field: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[field] : undefined
}

/**
 * Maps a Chat Completions `usage` object (overlapping counts) to disjoint
 * counts:
 * - `cacheRead` = `prompt_tokens_details.cached_tokens` (or DeepSeek's
 *   `prompt_cache_hit_tokens`), `input` = `prompt_tokens` − `cacheRead`;
 * - `reasoning` = `completion_tokens_details.reasoning_tokens`,
 *   `output` = `completion_tokens` − `reasoning`.
 *
 * A detail that is not a non-negative integer no larger than its total is
 * ignored (its tokens stay in `input` or `output`); a missing or malformed
 * total counts as 0.
 */
export function usageFromChat(raw: unknown): ResponseUsage {
  return disjoint(
    detail(raw, 'prompt_tokens'),
    detail(raw, 'completion_tokens'),
    detail(detail(raw, 'prompt_tokens_details'), 'cached_tokens') ?? detail(raw, 'prompt_cache_hit_tokens'),
    detail(detail(raw, 'completion_tokens_details'), 'reasoning_tokens'),
  )
}

/**
 * Maps a Responses `usage` object (overlapping counts, as in Chat) to
 * disjoint counts: `cacheRead` = `input_tokens_details.cached_tokens`,
 * `input` = `input_tokens` − `cacheRead`; `reasoning` =
 * `output_tokens_details.reasoning_tokens`, `output` = `output_tokens` −
 * `reasoning`. Malformed details and totals are treated as in
 * {@link usageFromChat}.
 */
export function usageFromResponses(raw: unknown): ResponseUsage {
  return disjoint(
    detail(raw, 'input_tokens'),
    detail(raw, 'output_tokens'),
    detail(detail(raw, 'input_tokens_details'), 'cached_tokens'),
    detail(detail(raw, 'output_tokens_details'), 'reasoning_tokens'),
  )
}

/** Disjoint counts from a prompt and completion total and the details they include. */
function disjoint(prompt: unknown, completion: unknown, cachedDetail: unknown, reasoningDetail: unknown): ResponseUsage {
  const promptTotal = isCount(prompt) ? prompt : 0
  const completionTotal = isCount(completion) ? completion : 0
  const cacheRead = isCount(cachedDetail) && cachedDetail <= promptTotal ? cachedDetail : 0
  const reasoning = isCount(reasoningDetail) && reasoningDetail <= completionTotal ? reasoningDetail : 0
  return { input: promptTotal - cacheRead, output: completionTotal - reasoning, cacheRead, reasoning }
}

/** A step's usage as `step/end` records it (the session vocabulary's `TokenUsage`: zero kinds other than input and output left out). */
export function stepUsage(usage: ResponseUsage): TokenUsage {
  return {
    input: usage.input,
    output: usage.output,
    ...(usage.cacheRead === 0 ? {} : { cacheRead: usage.cacheRead }),
    ...(usage.reasoning === 0 ? {} : { reasoning: usage.reasoning }),
  }
}

/**
 * Why a step stopped, from the Chat Completions `finish_reason` (or a
 * Responses status): `length` (Responses: incomplete for
 * `max_output_tokens`) → `max-tokens`; `tool_calls` (or the older `function_call`), or any reason
 * on a step that called tools → `tool-calls` (the driver runs them);
 * anything else (`stop`, `content_filter`, none) → `stop`.
 */
export function finishOf(reason: string | undefined, calledTools: boolean): StepFinish {
  if (reason === 'length' || reason === 'max_output_tokens') return 'max-tokens'
  if (reason === 'tool_calls' || reason === 'function_call' || calledTools) return 'tool-calls'
  return 'stop'
}

/** The sum of two usages, kind by kind. */
export function addUsage(a: ResponseUsage, b: ResponseUsage): ResponseUsage {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    reasoning: a.reasoning + b.reasoning,
  }
}
