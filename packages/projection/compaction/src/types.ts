import type { ContentBlock, Session, TokenUsage } from '@dsh/session'
import type { AttachmentResolver, SessionContext } from '@dsh/session-context'

/** What a summarizer is asked: summarize `context` (the messages a compaction shadows) following `instruction`. */
export interface SummarizeRequest {
  readonly sessionId: string
  /** The shadowed messages as a context a renderer takes (its `messages` are exactly the range). */
  readonly context: SessionContext
  /** What the summary must keep; the service's default unless the caller gave one. */
  readonly instruction: string
  /**
   * The bytes of the images and files the shadowed messages reference beyond
   * what their references hold inline, read before the request: a renderer's
   * `attachments` option. Absent when the service has no attachment source
   * (the renderer then sends a note that each is missing).
   */
  readonly attachments?: AttachmentResolver
  readonly signal?: AbortSignal
}

/**
 * The attachment bytes of one session, as `attachmentResolver` of
 * `@dsh/session-persistence` reads them: `load` reads those the messages
 * reference, `resolve` is the renderer's synchronous lookup.
 */
export interface SessionAttachments {
  readonly resolve: AttachmentResolver
  load(messages: Iterable<{ readonly blocks: readonly unknown[] }>, signal?: AbortSignal): Promise<number>
}

/** A summarizer's answer. */
export interface Summary {
  /** The summary's content; a string is one text block. Empty text is a failure. */
  readonly summary: readonly ContentBlock[] | string
  /** Who wrote it, stored on `compaction/summary`. */
  readonly provider?: string
  readonly model?: string
  readonly usage?: TokenUsage
}

/**
 * Service `summarizer`: writes the summary a compaction stores. A driver
 * package provides it (it owns the model client); compaction never imports
 * a driver. A summarizer rejects when it cannot summarize; compaction
 * records the failure and rethrows it typed.
 */
export interface Summarizer {
  summarize(request: SummarizeRequest): Promise<Summary>
}

/** Where a compaction is, reported to `onProgress` once the stage's events are durable. */
export type CompactionStage = 'started' | 'summarized' | 'ended'

export interface CompactOptions {
  /** Why: stored on `compaction/start` (e.g. `manual`, `budget`). */
  readonly reason: string
  /** The newest messages left verbatim (default the service's `keep`, 4); the cut moves back so a tool result stays with its call. */
  readonly keep?: number
  /** Overrides the summarize instruction. */
  readonly instruction?: string
  readonly signal?: AbortSignal
}

export interface CompactResult {
  readonly compactionId: string
  /** The shadowed events `[from, to)`. */
  readonly from: number
  readonly to: number
  /** How many context messages the summary replaced. */
  readonly shadowed: number
  /** Estimated context tokens before and after (see `estimateTokens`). */
  readonly tokensBefore: number
  readonly tokensAfter: number
}

export interface PruneOptions {
  /** Results whose text is shorter than this many characters are kept (default 2000). */
  readonly minChars?: number
  /** The newest results never pruned (default 4). */
  readonly keepNewest?: number
  /** The text a pruned result holds (default the context's own placeholder). */
  readonly placeholder?: string
}

export interface PruneResult {
  /** The calls whose results were pruned (empty: nothing written). */
  readonly callIds: readonly string[]
  /** The characters of result text the prune removed from the context. */
  readonly chars: number
}

export interface MaybeCompactOptions {
  /** The model's context window, in tokens. */
  readonly window: number
  /** Compact at this fraction of the window (default the service's `fraction`, 0.8). */
  readonly fraction?: number
  readonly keep?: number
  readonly signal?: AbortSignal
}

export interface MaybeCompactResult {
  /** The context's estimated tokens before any compaction. */
  readonly estimate: number
  /** `window * fraction`: at or above it the session was compacted. */
  readonly budget: number
  readonly compaction: CompactResult | undefined
}

/** Service `compaction`. Every write goes through the live session; the log is only appended to. */
export interface CompactionService {
  /** Summarizes all but the newest `keep` messages; `compaction/start`, `/summary`, `/end` (or `/end {error}` and a throw). */
  compact(session: Session, options: CompactOptions): Promise<CompactResult>
  /** Replaces old, large tool results by a placeholder (`compaction/prune`); no model is called. */
  prune(session: Session, options?: PruneOptions): Promise<PruneResult>
  /** The context's estimated tokens. */
  estimate(session: Session, signal?: AbortSignal): Promise<number>
  /** Compacts when the estimate reaches `window * fraction`. */
  maybeCompact(session: Session, options: MaybeCompactOptions): Promise<MaybeCompactResult>
}

export interface CompactionServiceOptions {
  /** Default `keep` (4). */
  readonly keep?: number
  /** Default budget fraction (0.8). */
  readonly fraction?: number
  /** The default summarize instruction. */
  readonly instruction?: string
  /** Called after each stage's events are durable (progress output; a test's crash point). */
  readonly onProgress?: (stage: CompactionStage, session: Session, compactionId: string) => void | Promise<void>
}

declare module '@dsh/context' {
  interface Services {
    compaction: CompactionService
    summarizer: Summarizer
  }
}
