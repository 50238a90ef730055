/** Token counts by kind. Kinds are disjoint: `input` is uncached input only, `reasoning` is not part of `output`. */
export interface TokenCounts {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly reasoning: number
}

export const TOKEN_KINDS = ['input', 'output', 'cacheRead', 'cacheWrite', 'reasoning'] as const
export type TokenKind = (typeof TOKEN_KINDS)[number]

export const NO_TOKENS: TokenCounts = Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 })

/**
 * Why an input was skipped. Every skip is counted, none throws:
 * - `invalid-usage`: a usage record with a count that is not a non-negative integer (or input/output missing);
 * - `invalid-time`: an event time that is not finite, or earlier than the start it closes (no duration counted);
 * - `invalid-event`: a known event type whose data lacks what the fold needs (a tool call without a string callId);
 * - `unmatched-turn-end`: `turn/end` with no open turn of that number;
 * - `unended-turn`: `turn/start` while another turn was open (the open one is dropped untimed);
 * - `unmatched-tool-result`: `tool/result` for no pending call;
 * - `unanswered-tool-call`: a call still pending when its turn ended (dropped untimed).
 */
export const SKIP_REASONS = [
  'invalid-usage',
  'invalid-time',
  'invalid-event',
  'unmatched-turn-end',
  'unended-turn',
  'unmatched-tool-result',
  'unanswered-tool-call',
] as const
export type SkipReason = (typeof SKIP_REASONS)[number]
export type SkipCounts = { readonly [R in SkipReason]: number }

/**
 * Model calls and tokens attributed to one provider and model. `null` is
 * "not recorded": a call before any `step/start {model, provider}` and
 * without a model in its message.
 */
export interface ModelUsage {
  readonly provider: string | null
  readonly model: string | null
  /** Model calls: steps (an open one too: a call still running or cut off), plus assistant messages outside any step. */
  readonly calls: number
  /** Calls without valid usage (none reported, or a step not ended): their tokens are unknown (cost is then unknown too). */
  readonly callsWithoutUsage: number
  readonly tokens: TokenCounts
}

export interface ToolUsage {
  readonly name: string
  readonly calls: number
  readonly errors: number
  /** Wall time of the calls whose result arrived, ms. */
  readonly ms: number
}

/** The `sessionStats` view: the session's own suffix only (events with `seq >= inheritedEventCount`). */
export interface SessionStats {
  /** Where the counted suffix starts (the fork cut). */
  readonly inheritedEventCount: number
  /** `turn/start` events. */
  readonly turns: number
  /** `step/end` events. */
  readonly steps: number
  /** Summed `turn/start` → `turn/end` wall time, ms. */
  readonly turnMs: number
  /** Summed model wall time, ms: from a segment start (turn/step start, user message, tool result) to the assistant message. */
  readonly modelMs: number
  /** Summed `tool/call` → `tool/result` wall time, ms. */
  readonly toolMs: number
  /** First-token latency: segment start → first token chunk, summed over `count` segments. */
  readonly firstToken: { readonly count: number; readonly totalMs: number; readonly meanMs: number | null }
  /** Token totals over every model. */
  readonly tokens: TokenCounts
  readonly byModel: readonly ModelUsage[]
  readonly tools: readonly ToolUsage[]
  readonly toolCalls: number
  readonly toolErrors: number
  /** `compaction/summary` events. */
  readonly compactions: number
  readonly skipped: SkipCounts
}

/** Where a call's tokens go. */
export interface Attribution {
  readonly provider: string | null
  readonly model: string | null
}

export interface OpenStep {
  /** Null when the `step/start` time was not finite. */
  readonly start: number | null
  /** From `step/start {provider, model}`; null when the step did not name it. */
  readonly named: Attribution | null
  /** The attribution of the step's last assistant message (the fallback when the step named none). */
  readonly last: Attribution | null
  /** Tokens counted from assistant messages in this step; replaced by the step's own usage at `step/end`. */
  readonly counted: readonly { readonly provider: string | null; readonly model: string | null; readonly tokens: TokenCounts }[]
}

/** The checkpointed state: the view's counters plus what is in flight. */
export interface SessionStatsState {
  readonly from: number
  readonly turns: number
  readonly steps: number
  readonly turnMs: number
  readonly modelMs: number
  readonly toolMs: number
  readonly firstTokenCount: number
  readonly firstTokenMs: number
  readonly byModel: readonly ModelUsage[]
  readonly tools: readonly ToolUsage[]
  readonly toolErrors: number
  readonly compactions: number
  readonly skipped: SkipCounts
  /** The open turn; `start` null when its time was not finite. */
  readonly turn: { readonly turn: number; readonly start: number | null } | null
  readonly step: OpenStep | null
  /** The open model segment (inside a turn or step), and whether its first token arrived. */
  readonly segment: { readonly start: number | null; readonly firstToken: boolean } | null
  readonly pending: readonly { readonly callId: string; readonly name: string; readonly start: number | null }[]
}
