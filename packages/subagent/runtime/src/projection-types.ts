import type { SessionSeq } from '@dsh/session'
import type { SubagentDescriptor } from './descriptor.js'
import type { SubagentOptions } from './options.js'

/**
 * The `subagent` unit's client view: mode and label folded from the
 * descriptor, plus the seq of that descriptor event. The seq is the own-suffix
 * proof: consumers accept the identity only when the descriptor lies at or
 * after the session's inherited cut (an ancestor's descriptor in a fork prefix
 * must never name the child).
 */
export type SubagentIdentityProjection =
  | { readonly mode: 'one-shot'; readonly label?: string; readonly seq: SessionSeq }
  | { readonly mode: 'continuable'; readonly label: string; readonly seq: SessionSeq }

/** Host/checkpoint state of the `subagent` unit: `{}` means "no valid descriptor" (none, corrupt or of another version). */
export interface SubagentIdentityState {
  readonly identity?: SubagentIdentityProjection
}

/** A child's `subagent/options` record and the seq of the event it came from. */
export interface SubagentOptionsRecord {
  readonly seq: SessionSeq
  readonly options: SubagentOptions
}

/**
 * The `subagentProfile` unit's view: the last valid descriptor (deep-frozen)
 * with its seq, and the valid options recorded after it (`null` when none).
 */
export interface SubagentProfileProjection {
  readonly seq: SessionSeq
  readonly descriptor: SubagentDescriptor
  readonly options: SubagentOptionsRecord | null
}

/** Host/checkpoint state of the `subagentProfile` unit: `{}` means "no valid descriptor". */
export interface SubagentProfileState {
  readonly profile?: { readonly seq: SessionSeq; readonly descriptor: SubagentDescriptor }
  readonly options?: SubagentOptionsRecord
}

/** Host/checkpoint state of the `subagentTiming` unit. */
export interface SubagentTimingState {
  /** Milliseconds spent in turns that ended after the session's own descriptor (the turn it arrived in included). */
  readonly settledMs: number
  /** The turn in progress, if any. */
  readonly activeTurn?: { readonly turn: number; readonly startedAt: number }
  /** Epoch ms of the session's first turn start, or of its descriptor for a subagent. */
  readonly startedAt?: number
  /** Epoch ms of its latest turn start or end since `startedAt`. */
  readonly endedAt?: number
  /** Set once its own log holds the final `subagent/end {reason:'closed'}`. */
  readonly closed?: true
}

/**
 * The `subagentTiming` client view: settled time plus the active turn (`null`
 * when idle), and the wall-clock span of the session's own turns in epoch ms
 * (`null` before a turn or descriptor with a time), and whether it has been
 * closed (`close`: it takes no further input).
 */
export interface SubagentTimingProjection {
  readonly settledMs: number
  readonly activeTurn: { readonly turn: number; readonly startedAt: number } | null
  readonly startedAt: number | null
  readonly endedAt: number | null
  readonly closed: boolean
}

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    subagent: SubagentIdentityState
    subagentTiming: SubagentTimingState
    subagentProfile: SubagentProfileState
  }
  interface SessionProjectionMap {
    /** `null` is the "computed to nothing" sentinel (no, corrupt or unknown-version descriptor). */
    subagent: SubagentIdentityProjection | null
    subagentTiming: SubagentTimingProjection
    subagentProfile: SubagentProfileProjection | null
  }
}
