import { isDshError, raceAbort, throwIfAborted } from '@dsh/context'
import type { Session, SessionStore } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { SessionProjections } from '@dsh/session-projection'
import type { SubagentBudgetExceeded, SubagentStepPricer } from './budget.js'
import type { BudgetLedger } from './budget-ledger.js'
import type { SubagentDescriptor, SubagentToolFilter } from './descriptor.js'
import type { SubagentDriver, SubagentTool } from './driver.js'
import { cancelled, SubagentError } from './errors.js'
import type { SubagentEndReason } from './lifecycle.js'
import type { QueuedInput } from './log-scan.js'
import { mergeSettings, type SubagentSettings } from './options.js'
import { SUBAGENT_IDENTITY_KEY, SUBAGENT_PROFILE_KEY } from './projection.js'
import type { SubagentIdentityProjection, SubagentProfileProjection } from './projection-types.js'
import type { SubagentServiceSource, SubagentSettlement, WaitEntry } from './runtime-types.js'

/** How many settled runs `wait` remembers without a read (oldest forgotten first; a forgotten one costs one read). */
const SETTLED_MEMORY = 1024

/** What a child runs with: its descriptor as logged and the settings its descriptor and options give it. */
export interface ChildProfile {
  readonly descriptor: SubagentDescriptor | undefined
  readonly settings: SubagentSettings
}

/** A run in progress: a child's, or a top-level session's turn (`drive`). */
export interface ActiveRun {
  readonly session: Session
  readonly controller: AbortController
  readonly done: Promise<SubagentSettlement>
  /** Set by drain or a budget stop: the reason logged in `subagent/end` instead of the turn's. */
  endReason?: SubagentEndReason
  /** Set by a budget stop: which budget was crossed. */
  exceeded?: SubagentBudgetExceeded
  /** The wall budget's backstop timer, cleared when the run ends. */
  wallTimer?: ReturnType<typeof setTimeout>
}

/**
 * A child with runs in progress or queued: from its first run's start until
 * its last queued message has run and no subagent it started is running any
 * more. `send` queues while this exists, unless the child is `waiting`.
 */
export interface BusyChild {
  readonly session: Session
  readonly inbox: QueuedInput[]
  /** Seqs of `subagent/notice {kind:'settled'}` events on the child that are due to wake it, oldest first. */
  readonly wakes: number[]
  /**
   * Between runs, live, for subagents of its own that are still running: a
   * settlement of one of them, a send or a resume starts its next run; a stop
   * (close, drain, disposal) ends the chain.
   */
  waiting?: boolean
  readonly idle: Promise<void>
  readonly resolveIdle: () => void
  /**
   * Callbacks `resolveIdle` calls once, each removed by its waiter when it
   * stops waiting (a `wait` that timed out or was aborted), so a child busy
   * for a long time holds only the waits still pending on it.
   */
  readonly waiters: Set<() => void>
  /**
   * Stops the chain after the current run: `close` (write the final end),
   * `drain`, or `park` (an interrupt that keeps queued input undelivered until
   * the next send or resume; a message sent before the run ends lifts it).
   */
  stop?: 'close' | 'drain' | 'park'
  /** The chain has ended and the child is going cold: new input waits for `idle`, then resumes it. */
  settling?: boolean
  readonly identity: SubagentIdentityProjection
  readonly profile: ChildProfile
}

export type SettledEntry = Extract<WaitEntry, { state: 'settled' }>

/**
 * The state every part of the runtime shares: the services (looked up at call
 * time), the driver, the runs and busy children of this process, and the
 * settled runs `wait` remembers.
 *
 * Invariants: a child is in `busy` from the start of its first run until its
 * last queued input has run, the subagents it waits for have settled, and it
 * has gone cold; `runs` holds exactly the runs whose driver has not returned;
 * `settled` holds at most 1024 entries.
 */
export class RuntimeCore {
  readonly services: SubagentServiceSource
  readonly driver: SubagentDriver
  readonly maxDepth: number
  readonly runs = new Map<string, ActiveRun>()
  readonly busy = new Map<string, BusyChild>()
  readonly #settled = new Map<string, SettledEntry>()
  readonly #tools: (session: Session) => readonly SubagentTool[]
  /** A runtime of a read-only host: it lists, and starts no run. */
  readonly readOnly: boolean
  /** The clock wall budgets are measured on (epoch ms). */
  readonly clock: () => number
  /** Prices the steps cost budgets count (a price table's). */
  readonly pricing: SubagentStepPricer | undefined
  /** The counters of budgeted children that are live in this process (see `budget-ledger.ts`). */
  readonly ledgers = new Map<string, BudgetLedger>()
  /** True once the runtime sees every appended event (`session/event`), which budgets need. */
  budgetsObserved = false
  disposed = false

  constructor(
    services: SubagentServiceSource,
    driver: SubagentDriver,
    maxDepth: number,
    tools: (session: Session) => readonly SubagentTool[],
    readOnly = false,
    budgets: { readonly clock?: () => number; readonly pricing?: SubagentStepPricer | undefined } = {},
  ) {
    this.services = services
    this.driver = driver
    this.maxDepth = maxDepth
    this.#tools = tools
    this.readOnly = readOnly
    this.clock = budgets.clock ?? Date.now
    this.pricing = budgets.pricing
  }

  assertLive(): void {
    if (this.disposed) throw new SubagentError('SUBAGENT_DISPOSED', 'This subagent runtime has been disposed; activate a new one.')
  }

  /** Spawn, resume and send start runs, which write: a read-only runtime refuses them. */
  assertWritable(): void {
    if (this.readOnly)
      throw new SubagentError(
        'SUBAGENT_READ_ONLY',
        'This subagent runtime belongs to a read-only host: it lists children but starts no run; open the host without readOnly to spawn, resume or send.',
      )
  }

  sessions(): SessionStore {
    const sessions = this.services.get('sessions')
    if (sessions === undefined)
      throw new SubagentError(
        'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE',
        "The subagent runtime needs the 'sessions' store; activate sessionStorePlugin first.",
      )
    return sessions
  }

  persistence(childId: string): SessionPersistence {
    const persistence = this.services.get('sessionPersistence')
    if (persistence === undefined) {
      throw new SubagentError(
        'SUBAGENT_PERSISTENCE_UNAVAILABLE',
        `Subagent '${childId}' is not live and there is no 'sessionPersistence' service to load it from.`,
      )
    }
    return persistence
  }

  projections(): SessionProjections {
    const projections = this.services.get('sessionProjections')
    if (projections === undefined || !projections.keys().includes(SUBAGENT_IDENTITY_KEY)) {
      throw new SubagentError(
        'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
        "Controlling subagents needs 'sessionProjections' with the 'subagent' unit registered; activate the projection plugin before subagentsPlugin.",
      )
    }
    return projections
  }

  /** The live session `ref` names (and, when it is a Session, is), or `code`. */
  liveCaller(
    sessions: SessionStore,
    ref: Session | string,
    code: 'SUBAGENT_PARENT_NOT_LIVE' | 'SUBAGENT_UNAUTHORIZED' | 'SUBAGENT_NOT_FOUND',
  ): Session {
    const id = typeof ref === 'string' ? ref : ref?.id
    const live = typeof id === 'string' ? sessions.get(id) : undefined
    if (live === undefined || (typeof ref !== 'string' && live !== ref)) {
      throw new SubagentError(code, `Session '${String(id)}' must be live in this process (restore it first).`)
    }
    return live
  }

  /** A live session's own identity from the watermark snapshot; `undefined` without one (or without the unit). */
  identityOf(session: Session): SubagentIdentityProjection | undefined {
    const projections = this.services.get('sessionProjections')
    if (projections === undefined || !projections.keys().includes(SUBAGENT_IDENTITY_KEY)) return undefined
    return ownIdentity(projections.snapshot(session, [SUBAGENT_IDENTITY_KEY])[SUBAGENT_IDENTITY_KEY], (seq) => session.isOwnSeq(seq))
  }

  /** A live child's own descriptor and the settings it runs with (options inherited through a fork never count). */
  profileOf(session: Session): ChildProfile {
    return ownProfile(this.projections().snapshot(session, [SUBAGENT_PROFILE_KEY])[SUBAGENT_PROFILE_KEY], (seq) => session.isOwnSeq(seq))
  }

  /** The tools a run of `session` may call, narrowed by `filter`. */
  toolsFor(session: Session, filter: SubagentToolFilter | undefined): readonly SubagentTool[] {
    const tools = this.#tools(session)
    if (filter === undefined) return Object.freeze([...tools])
    return Object.freeze(
      tools.filter((tool) => (filter.allow === undefined || filter.allow.includes(tool.name)) && !(filter.deny ?? []).includes(tool.name)),
    )
  }

  /** What `wait` reports for a child without a read, when this process saw its last run settle. */
  rememberedSettlement(id: string): SettledEntry | undefined {
    return this.#settled.get(id)
  }

  remember(entry: SettledEntry): void {
    this.#settled.delete(entry.id)
    this.#settled.set(entry.id, entry)
    if (this.#settled.size > SETTLED_MEMORY) this.#settled.delete(this.#settled.keys().next().value!)
  }

  forget(id: string): void {
    this.#settled.delete(id)
  }

  warn(message: string, error?: unknown): void {
    this.services.get('logger')?.warn(message, error)
  }
}

/** The profile a `subagentProfile` view gives a child: its own descriptor and options only (`isOwn` gates their seqs). */
export function ownProfile(profile: SubagentProfileProjection | null | undefined, isOwn: (seq: number) => boolean): ChildProfile {
  if (profile === null || profile === undefined || !isOwn(profile.seq)) return { descriptor: undefined, settings: {} }
  const options = profile.options !== null && isOwn(profile.options.seq) ? profile.options.options : undefined
  return { descriptor: profile.descriptor, settings: mergeSettings(profile.descriptor, options) }
}

/** An identity that passes the own-suffix gate, else `undefined`. */
export function ownIdentity(
  identity: SubagentIdentityProjection | null | undefined,
  isOwn: (seq: number) => boolean,
): SubagentIdentityProjection | undefined {
  return identity !== null && identity !== undefined && isOwn(identity.seq) ? identity : undefined
}

/**
 * A persistence read under the caller's signal: `CANCELLED` once it aborts,
 * and a missing session as `SUBAGENT_NOT_FOUND`.
 */
export async function guardRead<T>(signal: AbortSignal | undefined, op: () => Promise<T>, childId: string): Promise<T> {
  throwIfAborted(signal, cancelled)
  try {
    const result = await raceAbort(op(), signal, cancelled)
    throwIfAborted(signal, cancelled)
    return result
  } catch (error) {
    if (signal?.aborted) throw cancelled()
    if (isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) {
      throw new SubagentError('SUBAGENT_NOT_FOUND', `Subagent '${childId}' is neither live nor persisted.`, { cause: error })
    }
    throw error
  }
}
