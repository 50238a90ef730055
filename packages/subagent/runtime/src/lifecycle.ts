import type { JsonValue, Session, SessionId, TurnEndReason } from '@dsh/session'
import type { SubagentBudgetExceeded, SubagentBudgetSpent } from './budget.js'
import type { SubagentMode } from './descriptor.js'

/**
 * Lifecycle vocabulary the runtime writes (never a driver):
 *
 * On the child:
 * - `subagent/start {kind, turn, queued?, notice?}` before each run (`spawn`,
 *   `resume`, or `message`: delivery of input the child got while busy — one
 *   queued message, whose `subagent/queued` seq `queued` names, or a
 *   settlement notice from one of its own subagents, whose `subagent/notice`
 *   seq `notice` names).
 * - `subagent/end {turn, reason, text?, error?, spent?, exceeded?}` after each
 *   run (`spent` on a budgeted child, `exceeded` on a `budget` end); and one final
 *   `subagent/end {reason: 'closed'}` (no turn) when the child is closed: no
 *   run follows it and the child is not resumable.
 * - `subagent/queued {from, text}` when input arrives while the child is busy.
 *
 * On the parent:
 * - `subagent/notice` — `settled` when a child's run ends, `report` when a
 *   child reports. The parent's driver receives the notices appended since
 *   its previous turn started as `run.notices`; a `settled` notice on a busy
 *   continuable child also wakes it for a run of its own (see `runs.ts`).
 */
export const SUBAGENT_START_EVENT = 'subagent/start'
export const SUBAGENT_END_EVENT = 'subagent/end'
export const SUBAGENT_QUEUED_EVENT = 'subagent/queued'
export const SUBAGENT_NOTICE_EVENT = 'subagent/notice'

/**
 * What started a run: a spawn, an explicit resume, or input the child got
 * while busy, delivered after its previous run (a queued message, or a
 * settlement notice of one of its own subagents that wakes it).
 */
export type SubagentRunKind = 'spawn' | 'resume' | 'message'

/**
 * Why a run (or the child) ended: the run's `turn/end` reason, or
 * `invalid-output` (a one-shot result failed its `outputSchema`), `drained`
 * (its parent went away or closed while it ran), `closed` (the lifecycle's
 * final end, written by `close`), `budget` (the child, or an ancestor whose
 * budget it shares, used up a budget: `exceeded` says which).
 */
export type SubagentEndReason = TurnEndReason | 'invalid-output' | 'drained' | 'closed' | 'budget'

export interface SubagentStartData {
  readonly kind: SubagentRunKind
  readonly turn: number
  /** For `message` runs that deliver a queued message: the seq of its `subagent/queued` event. */
  readonly queued?: number
  /** For `message` runs woken by a settlement of one of the child's own subagents: the seq of that `subagent/notice`. */
  readonly notice?: number
}

export interface SubagentEndData {
  /** The run's turn; absent on the final `closed` end. */
  readonly turn?: number
  readonly reason: SubagentEndReason
  /** The run's final assistant text. */
  readonly text?: string
  /** A person-readable failure: `<CODE>: <message>`. */
  readonly error?: string
  /** A one-shot result that passed its `outputSchema`, parsed. */
  readonly output?: JsonValue
  /** On `closed`: how many queued messages were dropped undelivered. */
  readonly dropped?: number
  /** A budgeted child's figures (with its descendants') when the run ended; a resume counts on from them. */
  readonly spent?: SubagentBudgetSpent
  /** On `budget`: which budget was crossed, whose, its limit and the figure that crossed it. */
  readonly exceeded?: SubagentBudgetExceeded
}

export interface SubagentQueuedData {
  /** The sender (the parent's session id). */
  readonly from: string
  readonly text: string
}

/** A notice on the parent's log; the parent's driver gets it as input on its next turn. */
export type SubagentNotice =
  | {
      readonly kind: 'settled'
      readonly child: SessionId
      readonly mode: SubagentMode
      readonly label?: string
      readonly reason: SubagentEndReason
      readonly text?: string
      readonly error?: string
      /** On `budget`: which budget was crossed. */
      readonly exceeded?: SubagentBudgetExceeded
      /**
       * The run ended while subagents the child started are still running:
       * the child stays live, and each of their settlements wakes it for
       * another run (whose own notice follows). Only continuable children wait.
       */
      readonly waiting?: true
    }
  | {
      readonly kind: 'report'
      readonly child: SessionId
      /** How the reporting child was started (absent in notices written before it was recorded). */
      readonly mode?: SubagentMode
      readonly label?: string
      readonly text: string
    }

declare module '@dsh/context' {
  interface ContextEvents {
    /**
     * A run of `child` is about to start: emitted on the runtime's context
     * right before its `subagent/start` is appended. A listener may append
     * records of its own to the child here (they land before `subagent/start`
     * and are part of the child's log from then on); it must not append
     * `subagent/*`, turn or message events, which the runtime and the driver
     * own. The descriptor is already written, so nothing here can change it.
     */
    'subagent/run-start': [child: Session, run: { readonly kind: SubagentRunKind; readonly turn: number }]
  }
}

declare module '@dsh/session' {
  interface SessionEventMap {
    'subagent/start': SubagentStartData
    'subagent/end': SubagentEndData
    'subagent/queued': SubagentQueuedData
    'subagent/notice': SubagentNotice
  }
}
