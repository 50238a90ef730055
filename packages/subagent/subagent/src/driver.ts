import type { Session, TurnEndReason } from '@dsh/session'
import type { SubagentDescriptor } from './descriptor.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/** One run of a child: a spawn's first turn or a resume's next turn. */
export interface SubagentRun {
  readonly kind: 'spawn' | 'resume'
  /** The live child session the driver appends to. */
  readonly session: Session
  /** The child's identity as the `subagent` unit folds it (mode, label, descriptor seq). */
  readonly identity: SubagentIdentityProjection
  /** On spawn, the descriptor the runtime just appended (provider and settings). */
  readonly descriptor?: SubagentDescriptor
  /** The turn number to use for `turn/start` … `turn/end` (one above any turn already in the log). */
  readonly turn: number
  /** The prompt of this run; the runtime already appended it as `user/message`. */
  readonly prompt?: string
  /** Aborted by `interrupt` (or runtime disposal): end the turn with `reason: 'cancelled'` promptly. */
  readonly signal: AbortSignal
}

export interface SubagentRunOutcome {
  readonly reason: TurnEndReason
  /** The final assistant text, when the driver produced one. */
  readonly text?: string
  /** Why the run failed, when `reason` is `error`. */
  readonly error?: unknown
}

/**
 * Runs a child's turn by appending to its session: `turn/start`, assistant
 * chunks and messages, tool calls and results, `turn/end`. Pluggable: a model
 * integration lives outside this project; tests and the demo use the scripted
 * driver.
 */
export interface SubagentDriver {
  /** Written into descriptors as the default `provider`. */
  readonly name: string
  run(run: SubagentRun): Promise<SubagentRunOutcome>
}
