import type { ContentBlock, StepFinish, TokenUsage } from './blocks.js'
import type { SessionSeq } from './brands.js'
import type { JsonValue } from './json.js'

/** Why a turn ended. `interrupted` is written by crash repair. */
export type TurnEndReason = 'completed' | 'interrupted' | 'cancelled' | 'error'

/**
 * The event vocabulary. Packages add types by augmentation:
 * `declare module '@dsh/session' { interface SessionEventMap { 'x/y': {...} } }`
 */
export interface SessionEventMap {
  'turn/start': { turn: number }
  'turn/end': { turn: number; reason: TurnEndReason }
  /** `blocks`, when present, is the message's content; `text` is its plain-text mirror for readers of text only. */
  'user/message': { text: string; blocks?: readonly ContentBlock[] }
  'assistant/chunk': { turn: number; index: number; delta: string }
  /**
   * One model step's assembled answer. `blocks`, when present, is the whole
   * step's content (reasoning, text, tool calls), and the `tool/call` events
   * that follow it for the same call ids mirror those calls for readers of
   * the older events; without `blocks` the step is `text` plus the streamed
   * chunks and calls before it.
   */
  'assistant/message': {
    turn: number
    text: string
    usage?: TokenUsage
    blocks?: readonly ContentBlock[]
    provider?: string
    model?: string
  }
  'tool/call': { turn: number; callId: string; name: string; arguments: JsonValue }
  /** `blocks`, when present, is the result's content for the model; `content` stays the tool's JSON outcome. */
  'tool/result': { turn: number; callId: string; content: JsonValue; isError?: boolean; blocks?: readonly ContentBlock[] }
  /**
   * A model call begins. dsh drivers write `model` and `provider` (and `api`,
   * the wire protocol, where a provider speaks more than one, e.g. `responses`);
   * logs imported from the harness carry `{turn, step}` only.
   */
  'step/start': { model?: string; provider?: string; api?: string; turn?: number; step?: number }
  /** A model call ended: its own disjoint usage and why it stopped (the harness's logs carry `{turn, step}` only). */
  'step/end': {
    usage?: TokenUsage
    finish?: StepFinish
    /** The provider's id of the response (a Chat Completions `id`; for OpenAI Responses, what `previous_response_id` names). */
    responseId?: string
    turn?: number
    step?: number
  }
  /** A compaction begins. An unfinished one (no `compaction/end`, or an end with `error`) changes no context. */
  'compaction/start': CompactionOwner & { reason?: string }
  /**
   * The summary that replaces the shadowed part of the context once
   * `compaction/end` without `error` follows. The range is the events
   * `[from, to)`; a harness log names the shadowed message events in
   * `shadowedSeqs` instead (and its span in `shadowedRange`).
   */
  'compaction/summary': CompactionOwner & {
    summary: readonly ContentBlock[]
    from?: number
    to?: number
    shadowedRange?: { start: number; end: number }
    shadowedSeqs?: readonly number[]
    shadowedTokenCount?: number
    /** The provider and model that wrote the summary. */
    provider?: string
    model?: string
    maxTokens?: number
    /** The summarizing call's usage: dsh's names, or the harness's (`inputTokens`, `outputTokens`, …). */
    usage?: TokenUsage | HarnessTokenUsage
    rawOutput?: readonly JsonValue[]
    llmStreamCall?: boolean
  }
  /** A compaction ends; `error` says it failed or was interrupted, and then its summary is not applied. */
  'compaction/end': CompactionOwner & { error?: string }
  /**
   * Tool results whose content the model does not need: dsh names them by
   * `callIds`; a harness log names the shadowed result events in
   * `shadowedSeqs`. Their content is replaced by `placeholder` (or a short
   * default text); the calls and results stay paired.
   */
  'compaction/prune': {
    callIds?: readonly string[]
    placeholder?: string
    shadowedRange?: { start: number; end: number }
    shadowedSeqs?: readonly number[]
    shadowedTokenCount?: number
  }
}

/** Which compaction an event belongs to. All optional: a log may hold one compaction at a time and name none. */
export type CompactionOwner = {
  compactionId?: string
  sourceCommandId?: string
  /** The turn that owns the compaction, or null for one between turns. */
  turn?: number | null
}

/** Usage in the harness's names (same disjoint meaning as {@link TokenUsage}). */
export type HarnessTokenUsage = {
  inputTokens: number
  outputTokens: number
  cacheReadTokens?: number
  cacheWriteTokens?: number
  reasoningTokens?: number
}

export type SessionEventType = keyof SessionEventMap & string

/** One logged event. `seq` always equals its index in the log. */
export type SessionEvent<T extends SessionEventType = SessionEventType> = {
  [K in T]: {
    readonly type: K
    readonly seq: SessionSeq
    /** Wall-clock epoch ms at append. */
    readonly time: number
    /** Deep-frozen at run time. */
    readonly data: Readonly<SessionEventMap[K]>
  }
}[T]

/**
 * An event of any type, as persistence stores and returns it: persistence is
 * lossless for types it does not know.
 */
export interface StoredSessionEvent {
  readonly type: string
  readonly seq: SessionSeq
  readonly time: number
  readonly data: JsonValue
}
