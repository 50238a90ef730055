export { persistedAttachments } from './attachments.js'
export type { CompactionErrorCode } from './errors.js'
export { CompactionError } from './errors.js'
export { ATTACHMENT_TOKENS, blockText, estimateMessageTokens, estimateTokens, MESSAGE_OVERHEAD_TOKENS } from './estimate.js'
export { compactionPlugin } from './plugin.js'
export type { ShadowedRange } from './range.js'
export { shadowedRange } from './range.js'
export { INTERRUPTED_COMPACTION_ERROR, interruptedCompactionEnds } from './repair.js'
export type { CompactionDependencies } from './service.js'
export {
  createCompactionService,
  DEFAULT_FRACTION,
  DEFAULT_INSTRUCTION,
  DEFAULT_KEEP,
  DEFAULT_PRUNE_KEEP_NEWEST,
  DEFAULT_PRUNE_MIN_CHARS,
  NO_GAIN_COMPACTION_ERROR,
} from './service.js'
export type {
  CompactionService,
  CompactionServiceOptions,
  CompactionStage,
  CompactOptions,
  CompactResult,
  MaybeCompactOptions,
  MaybeCompactResult,
  PruneOptions,
  PruneResult,
  SessionAttachments,
  SummarizeRequest,
  Summarizer,
  Summary,
} from './types.js'
