import type { ContentBlock, JsonValue, StepFinish, TokenUsage, ToolCallBlock } from '@dsh/session'

/**
 * A block of a type the reader does not know (another package's, or a newer
 * one): kept as it was so nothing is lost, counted in `warnings`, and
 * skipped by renderers.
 */
export type UnknownBlock = { readonly type: string; readonly [field: string]: JsonValue }

/** What a context message holds: the content vocabulary of `@dsh/session`, or a block kept unread. */
export type ContextBlock = ContentBlock | UnknownBlock

export type ContextRole = 'system' | 'user' | 'assistant' | 'tool'

/** The events a compaction summary stands for. */
export type ContextSummaryMark = {
  /** The `compaction/summary` event. */
  readonly seq: number
  readonly compactionId?: string
  /** The shadowed events `[from, to)`; for a harness compaction the span of its `shadowedSeqs`. */
  readonly from: number
  readonly to: number
  /** Who wrote the summary, when the log says. */
  readonly provider?: string
  readonly model?: string
}

/**
 * One message of the model-visible context. A `tool` message holds exactly
 * one `tool-result` block.
 */
export type ContextMessage = {
  readonly role: ContextRole
  readonly blocks: readonly ContextBlock[]
  /**
   * The event that made the message: a message event's own seq; for a step
   * assembled from streamed events and calls, its first event; for a
   * summary, the first event it shadows. Compaction ranges select messages
   * by it.
   */
  readonly seq: number
  /** Who wrote an assistant message, when the log says. */
  readonly provider?: string
  readonly model?: string
  /** Set on the message that stands for a compacted range (a `user` message holding the summary). */
  readonly summary?: ContextSummaryMark
  /** Set on a tool message the view made for a call the log shows no result for. */
  readonly synthetic?: true
}

/** The newest model call, as the log describes it. */
export type ContextStep = {
  readonly seq: number
  readonly provider: string | null
  readonly model: string | null
  /** False between `step/start` and `step/end`. */
  readonly ended: boolean
  readonly usage?: TokenUsage
  readonly finish?: StepFinish
}

/**
 * What a fold skipped or kept unread, by reason. Nothing throws; every skip
 * is counted:
 * - `invalid-event`: an event of a known type whose data lacks what the fold needs;
 * - `invalid-block`: a block of a known type with a bad shape, or a `tool-result` nested in a tool result's content (dropped);
 * - `unknown-block`: a block of a type the reader does not know (kept, renderers skip it);
 * - `unmatched-compaction`: a `compaction/summary` or `compaction/end` with no open compaction it belongs to;
 * - `abandoned-compaction`: a compaction ended with `error`, ended without a summary, or was left open when another began;
 * - `unmatched-prune`: a `compaction/prune` naming no tool result in the context.
 */
export const FOLD_WARNINGS = [
  'invalid-event',
  'invalid-block',
  'unknown-block',
  'unmatched-compaction',
  'abandoned-compaction',
  'unmatched-prune',
] as const
export type FoldWarning = (typeof FOLD_WARNINGS)[number]

/**
 * What the view adds to the fold's counts:
 * - `orphan-result`: a tool result whose call is not in the context (left out of `messages`);
 * - `missing-result`: a call the log shows no result for (answered by a synthetic error result).
 */
export const VIEW_WARNINGS = ['orphan-result', 'missing-result'] as const
export type ViewWarning = (typeof VIEW_WARNINGS)[number]

export type ContextWarnings = { readonly [W in FoldWarning | ViewWarning]: number }

/** A model step being assembled from streamed events (`assistant/chunk`, `assistant/reasoning`, `tool/call`). */
export type OpenAssistant = {
  readonly seq: number
  /**
   * The `step/start` of the model step it streams in, when that step began
   * before `seq` (absent: the step begins at `seq`). A notice that lands
   * after it is read after the step, even one that lands before the step's
   * first streamed event.
   */
  readonly from?: number
  readonly text: string
  readonly reasoning: string
  /**
   * The step's calls in order. On a step the fold extended by a `tool/call`
   * event this is an enumerable accessor that builds the array on first
   * read and returns that same array at every read (see `withCall`): it
   * reads, serializes and compares as a plain array.
   */
  readonly calls: readonly ToolCallBlock[]
}

/** A compaction begun and not yet ended. */
export type OpenCompaction = {
  readonly seq: number
  readonly compactionId: string | null
  readonly summary: {
    readonly mark: ContextSummaryMark
    readonly blocks: readonly ContextBlock[]
    /** For a harness compaction: exactly the message events it shadows. */
    readonly seqs?: readonly number[]
  } | null
}

/**
 * The checkpointed state of the `sessionContext` unit (plain JSON). It is
 * also the unit's view: reading it costs nothing, and `contextView` turns it
 * into the model-visible {@link SessionContext}.
 */
export type SessionContextState = {
  /** The last event that changed the state (-1: none). A resumed fold continues after it. */
  readonly seq: number
  /** The committed messages in log order, in chunks (so an append copies one chunk, not the transcript). */
  readonly chunks: readonly (readonly ContextMessage[])[]
  readonly open: OpenAssistant | null
  /** Call ids of the newest assistant message written with blocks: `tool/call` events naming them mirror it. */
  readonly mirrors: readonly string[]
  readonly compactions: readonly OpenCompaction[]
  /** The newest compaction applied. */
  readonly compaction: ContextSummaryMark | null
  readonly step: ContextStep | null
  /** Who wrote the newest assistant message or step, when the log says. */
  readonly provider: string | null
  readonly model: string | null
  readonly warnings: { readonly [W in FoldWarning]: number }
}

/**
 * The model-visible context of a session: what a renderer turns into a
 * provider request. Every tool call is followed by exactly one result
 * (synthetic for a call the log shows no result for), results sit right
 * after the message holding their calls, compacted ranges are replaced by
 * their summary, pruned results hold a placeholder.
 */
export interface SessionContext {
  readonly messages: readonly ContextMessage[]
  /** The newest model call (its model and provider are what a renderer targets by default). */
  readonly step: ContextStep | null
  readonly provider: string | null
  readonly model: string | null
  /** The newest compaction applied, or null. */
  readonly compaction: ContextSummaryMark | null
  /** True while a compaction has begun and not ended (its summary is not applied yet). */
  readonly compacting: boolean
  /** The last event folded (-1: none). */
  readonly seq: number
  readonly warnings: ContextWarnings
}

/** The unit's key; its view is its state (see {@link SessionContextState}). */
export const SESSION_CONTEXT_KEY = 'sessionContext'

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    sessionContext: SessionContextState
  }
  interface SessionProjectionMap {
    sessionContext: SessionContextState
  }
}
