import { DshError } from '@dsh/context'

export type CompactionErrorCode =
  /** `compact` was called but no `summarizer` service is available (activate a driver's summarizer first). */
  | 'COMPACTION_NO_SUMMARIZER'
  /** The summarizer failed or answered what cannot be stored; the log holds `compaction/end {error}` and the context is unchanged. */
  | 'COMPACTION_SUMMARIZER_FAILED'
  /** The summary was not shorter (estimated tokens) than the messages it would replace; the log holds `compaction/end {error: 'no-gain'}` and the context is unchanged. */
  | 'COMPACTION_NO_GAIN'
  /** The context holds too few messages to shadow any with the `keep` asked for. */
  | 'COMPACTION_NOTHING_TO_COMPACT'
  /** Another compaction of the session is in progress in this process. */
  | 'COMPACTION_BUSY'
  /** A bad argument: `keep`, `window`, `fraction`, `minBytes`, `keepNewest`, or a target that is not a live session. */
  | 'COMPACTION_INVALID_OPTIONS'
  /** The caller's `signal` aborted: before the start nothing is written, after it the log holds `compaction/end {error: 'cancelled'}`. */
  | 'CANCELLED'

export class CompactionError extends DshError<CompactionErrorCode> {}
