import type { ContextEvents, Services } from '@dsh/context'
import type { Session, SessionId } from '@dsh/session'
import type { SubagentBudget, SubagentBudgetExceeded } from './budget.js'
import type { SubagentMode } from './descriptor.js'
import type { SubagentRunOutcome } from './driver.js'
import type { SubagentEndReason } from './lifecycle.js'
import type { SubagentSettings } from './options.js'

/** How deep delegation may go when `maxDepth` is not given: a top-level session is depth 0. */
export const DEFAULT_MAX_DEPTH = 3
/** How long `wait` waits when no timeout is given, and the longest it ever waits. */
export const DEFAULT_WAIT_MS = 60_000
export const MAX_WAIT_MS = 600_000

export interface SpawnOptions {
  readonly mode: SubagentMode
  /** Required for continuable children (they are addressed by it), optional for one-shot. */
  readonly label?: string
  /** Recorded in the descriptor; defaults to the driver's name. */
  readonly provider?: string
  /** `fresh`: an empty log. `fork`: seeded with the parent's log up to `boundary`. */
  readonly context: 'fresh' | 'fork'
  /** Appended as the child's `user/message` before its first turn. */
  readonly prompt?: string
  /**
   * What the child runs with (persona, toolFilter, outputSchema, model, …):
   * the descriptor carries what the harness's descriptor has room for (a
   * continuable child's composition), the `subagent/options` event the rest.
   */
  readonly settings?: SubagentSettings
  /** The child's id (default: the store's id generator). */
  readonly id?: string
  /** Fork cut (default: the latest cut outside an open turn, so a parent mid-turn can fork). */
  readonly boundary?: number
  readonly agentPreset?: string
}

export interface ResumeOptions {
  /** The calling session: it must be live and be the child's parent. */
  readonly caller: Session | string
  readonly prompt?: string
}

/** Who is asking: a live session in this process. */
export interface CallerOptions {
  readonly caller: Session | string
}

/** How a run of a child ended: the driver's outcome plus the reason recorded in `subagent/end`. */
/** What an interrupt does with queued input and when it resolves. */
export interface InterruptOptions extends CallerOptions {
  /**
   * `deliver` (default): input queued for the child still runs, in order,
   * after the interrupted turn. `park`: it stays logged and undelivered; the
   * next `send` or `resume` delivers it first, then its own input.
   */
  readonly queued?: 'deliver' | 'park'
  /** `settled` (default): resolve once the interrupted run has settled. `requested`: as soon as the stop is requested. */
  readonly until?: 'settled' | 'requested'
}

export interface SubagentSettlement extends SubagentRunOutcome {
  readonly end: SubagentEndReason
  /** On a `budget` end: which budget was crossed. */
  readonly exceeded?: SubagentBudgetExceeded
}

export interface SubagentHandle {
  readonly id: SessionId
  /** The live child session (it goes cold when its runs settle, if persistence is present). */
  readonly session: Session
  /** Settles when this run ends and its end is logged; never rejects. */
  readonly done: Promise<SubagentSettlement>
  /** The budget the child runs under, as recorded (a request above the parent's remainder is clamped); absent without one of its own. */
  readonly budget?: SubagentBudget
}

/** The result of `send`: delivered at once (a new run started) or queued behind the running turn. */
export type SendResult =
  | { readonly status: 'started'; readonly handle: SubagentHandle }
  | { readonly status: 'queued'; readonly position: number }

/** One child's state as `wait` reports it. */
export type WaitEntry =
  | { readonly id: string; readonly state: 'running'; readonly queued: number }
  | {
      readonly id: string
      readonly state: 'settled'
      readonly reason?: SubagentEndReason
      readonly text?: string
      readonly error?: string
      readonly output?: unknown
      readonly exceeded?: SubagentBudgetExceeded
    }
  | { readonly id: string; readonly state: 'closed' }
  | { readonly id: string; readonly state: 'not-found' }

export interface WaitOptions extends CallerOptions {
  /** Default `DEFAULT_WAIT_MS`, at most `MAX_WAIT_MS`. On timeout the unsettled children report `running`. */
  readonly timeoutMs?: number
  readonly signal?: AbortSignal
}

export interface CloseResult {
  readonly id: SessionId
  /** The child was running a turn and was interrupted. */
  readonly interrupted: boolean
  /** Queued messages dropped undelivered. */
  readonly dropped: number
}

/** Where the runtime looks up services at call time and announces runs (a `Context` fits). */
export interface SubagentServiceSource {
  get<K extends keyof Services & string>(name: K): Services[K] | undefined
  /** Announces `subagent/run-start` to the context's listeners (see `ContextEvents`); optional, so a bare service map fits too. */
  emit?(name: 'subagent/run-start', ...args: ContextEvents['subagent/run-start']): void
  /** Every append to a live session (a `Context` has it): budgets are counted from it; without it a budgeted spawn is refused. */
  on?(name: 'session/event', listener: (...args: ContextEvents['session/event']) => void): () => void
}
