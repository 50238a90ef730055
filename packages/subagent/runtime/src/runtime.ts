import { definePlugin, isDshError, raceAbort, type Services, throwIfAborted } from '@dsh/context'
import { type Session, type SessionHeader, type SessionId, type SessionStore, type StoredSessionEvent, sameLifecycle } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { SessionProjections } from '@dsh/session-projection'
import {
  SUBAGENT_DESCRIPTOR_EVENT,
  SUBAGENT_DESCRIPTOR_VERSION,
  type SubagentDescriptor,
  type SubagentMode,
  type SubagentSettings,
  type SubagentToolFilter,
  subagentDescriptorSchema,
} from './descriptor.js'
import type { SubagentDriver, SubagentRun, SubagentRunOutcome, SubagentTool } from './driver.js'
import { cancelled, SubagentError } from './errors.js'
import {
  SUBAGENT_END_EVENT,
  SUBAGENT_NOTICE_EVENT,
  SUBAGENT_QUEUED_EVENT,
  SUBAGENT_START_EVENT,
  type SubagentEndData,
  type SubagentEndReason,
  type SubagentNotice,
  type SubagentRunKind,
} from './lifecycle.js'
import { explainChildren, explainDescendants, listChildren, listDescendants } from './list-children.js'
import type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry } from './list-types.js'
import { checkOutput, compileOutputSchema } from './output.js'
import { registerSubagentUnits, SUBAGENT_IDENTITY_KEY, SUBAGENT_PROFILE_KEY } from './projection.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/** How deep delegation may go when `maxDepth` is not given: a top-level session is depth 0. */
export const DEFAULT_MAX_DEPTH = 3
/** How long `wait` waits when no timeout is given, and the longest it ever waits. */
export const DEFAULT_WAIT_MS = 60_000
export const MAX_WAIT_MS = 600_000
/** How many `parentSession` links an ancestor check follows (a guard against damaged, cyclic data). */
const MAX_ANCESTRY = 64
/** How many settled runs `wait` remembers without a read (oldest forgotten first; a forgotten one costs one read). */
const SETTLED_MEMORY = 1024

/** Gives an agent its tools for one run (the runtime narrows them by the child's `toolFilter`). */
export type SubagentToolProvider = (agent: Session, runtime: SubagentRuntime) => readonly SubagentTool[]

export interface SubagentRuntimeOptions {
  readonly driver: SubagentDriver
  /** The deepest `delegationDepth` a child may have (default 3); deeper spawns fail with `SUBAGENT_DEPTH_EXCEEDED`. */
  readonly maxDepth?: number
  /** The tools every run may call (e.g. `subagentControlTools` from `@dsh/tool-subagent-control`). */
  readonly tools?: SubagentToolProvider
}

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
  /** Capabilities and settings written into the descriptor (persona, toolFilter, outputSchema, model, …). */
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
export interface SubagentSettlement extends SubagentRunOutcome {
  readonly end: SubagentEndReason
}

export interface SubagentHandle {
  readonly id: SessionId
  /** The live child session (it goes cold when its runs settle, if persistence is present). */
  readonly session: Session
  /** Settles when this run ends and its end is logged; never rejects. */
  readonly done: Promise<SubagentSettlement>
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

/** Where the runtime looks up services at call time (a `Context` fits). */
export interface SubagentServiceSource {
  get<K extends keyof Services & string>(name: K): Services[K] | undefined
}

interface ActiveRun {
  readonly session: Session
  readonly controller: AbortController
  readonly done: Promise<SubagentSettlement>
  /** Set by drain: the reason logged in `subagent/end` instead of the turn's. */
  endReason?: SubagentEndReason
}

interface QueuedInput {
  readonly seq: number
  readonly text: string
}

/**
 * A child with runs in progress or queued: from its first run's start until
 * its last queued message has run. `send` queues while this exists.
 */
interface BusyChild {
  readonly inbox: QueuedInput[]
  readonly idle: Promise<void>
  readonly resolveIdle: () => void
  /** Stops the chain after the current run: `close` (write the final end) or `drain`. */
  stop?: 'close' | 'drain'
  /** The chain has ended and the child is going cold: new input waits for `idle`, then resumes it. */
  settling?: boolean
  identity: SubagentIdentityProjection
  descriptor: SubagentDescriptor | undefined
}

/**
 * Runs and controls subagents (service `subagents`) and lists a parent's
 * catalog.
 *
 * Invariants:
 * - Every run of a child is bracketed in its log by `subagent/start` and
 *   `subagent/end`; a closed child's last own event is `subagent/end {reason:'closed'}`
 *   and it never runs again.
 * - Input sent to a busy child is logged (`subagent/queued`) before `send`
 *   returns and delivered in order, one run per message, when the running
 *   turn ends; a crash leaves it in the log and the next resume delivers it.
 * - A parent hears of every settled run of a live child (`subagent/notice`);
 *   a parent that goes away first drains its running children (`drained`).
 * - Only a child's parent may resume it or send it input; only its parent or
 *   an ancestor may interrupt, wait for or close it.
 *
 * After its runs settle a child goes cold (`sessions.dispose`) when a
 * `sessionPersistence` service is present; without one it stays live.
 */
export class SubagentRuntime {
  readonly #services: SubagentServiceSource
  readonly #driver: SubagentDriver
  readonly #maxDepth: number
  readonly #tools: SubagentToolProvider | undefined
  readonly #runs = new Map<string, ActiveRun>()
  readonly #busy = new Map<string, BusyChild>()
  /** The last settled run per child in this process, so `wait` needs no read for them. */
  readonly #settled = new Map<string, Extract<WaitEntry, { state: 'settled' }>>()
  #disposed = false

  constructor(services: SubagentServiceSource, options: SubagentRuntimeOptions) {
    const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
    if (!Number.isSafeInteger(maxDepth) || maxDepth < 0) {
      throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `maxDepth must be a non-negative integer, got ${String(maxDepth)}.`)
    }
    this.#services = services
    this.#driver = options.driver
    this.#maxDepth = maxDepth
    this.#tools = options.tools
  }

  get maxDepth(): number {
    return this.#maxDepth
  }

  /**
   * Creates a child of the live `parent` (origin `subagent`, depth + 1),
   * appends its descriptor as the first own event, then runs it through the
   * driver in the background. Synchronous: the child is live on return.
   */
  spawn(parent: Session | string, options: SpawnOptions): SubagentHandle {
    this.#assertLive()
    const sessions = this.#sessions()
    const parentSession = this.#liveCaller(sessions, parent, 'SUBAGENT_PARENT_NOT_LIVE')
    const depth = parentSession.header.delegationDepth + 1
    if (depth > this.#maxDepth) {
      throw new SubagentError(
        'SUBAGENT_DEPTH_EXCEEDED',
        `Session '${parentSession.id}' is at delegation depth ${parentSession.header.delegationDepth}; a child would be at depth ${depth}, beyond this runtime's maxDepth of ${this.#maxDepth}.`,
        { details: { parent: parentSession.id, depth, maxDepth: this.#maxDepth } },
      )
    }
    if (options.context !== 'fresh' && options.context !== 'fork') {
      throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `context must be 'fresh' or 'fork', got ${JSON.stringify(options.context)}.`)
    }
    // Validated before the child exists, so a bad request leaves no debris.
    const descriptor = this.#descriptor(options)
    const common = {
      origin: 'subagent' as const,
      delegationDepth: depth,
      ...(parentSession.header.cwd === undefined ? {} : { cwd: parentSession.header.cwd }),
      ...(options.agentPreset === undefined ? {} : { agentPreset: options.agentPreset }),
    }
    const child =
      options.context === 'fork'
        ? sessions.fork(parentSession, {
            ...common,
            boundary: options.boundary ?? latestClosedCut(parentSession),
            ...(options.id === undefined ? {} : { childId: options.id }),
          })
        : sessions.create({ ...common, parentSession: parentSession.id, ...(options.id === undefined ? {} : { id: options.id }) })
    const event = child.append(SUBAGENT_DESCRIPTOR_EVENT, descriptor)
    const identity: SubagentIdentityProjection =
      descriptor.mode === 'continuable'
        ? { mode: 'continuable', label: descriptor.label, seq: event.seq }
        : { mode: 'one-shot', seq: event.seq, ...(descriptor.label === undefined ? {} : { label: descriptor.label }) }
    return this.#startChild(sessions, child, 'spawn', identity, descriptor, options.prompt)
  }

  /**
   * Runs another turn of a continuable child. The caller must be the child's
   * live parent (`SUBAGENT_UNAUTHORIZED`); the child must be continuable by its
   * own descriptor (`SUBAGENT_NOT_RESUMABLE`), not closed (`SUBAGENT_CLOSED`)
   * and idle (`SUBAGENT_BUSY`; `send` queues instead). A cold child is
   * inspected first (no mutation), then loaded and restored. Input that was
   * queued before a crash is delivered first, then `prompt`.
   */
  async resume(childId: string, options: ResumeOptions, signal?: AbortSignal): Promise<SubagentHandle> {
    this.#assertLive()
    throwIfAborted(signal, cancelled)
    const sessions = this.#sessions()
    const projections = this.#projections()
    const caller = this.#liveCaller(sessions, options.caller, 'SUBAGENT_UNAUTHORIZED')
    const authorize = (header: SessionHeader): void => {
      if (header.origin !== 'subagent' || header.parentSession !== caller.id) {
        throw new SubagentError(
          'SUBAGENT_UNAUTHORIZED',
          `Session '${childId}' is not a subagent of '${caller.id}'; only its parent may resume it or send it input.`,
        )
      }
    }
    const state = this.#busy.get(childId)
    if (state?.settling === true) await state.idle
    else if (state !== undefined) {
      const live = sessions.get(childId)
      if (live !== undefined) authorize(live.header)
      throw busy(childId)
    }

    const live = sessions.get(childId)
    if (live !== undefined) {
      authorize(live.header)
      const identity = ownIdentity(projections.snapshot(live, [SUBAGENT_IDENTITY_KEY])[SUBAGENT_IDENTITY_KEY], (seq) => live.isOwnSeq(seq))
      if (identity?.mode !== 'continuable') throw notResumable(childId)
      if (isClosed(live.events, live.inheritedEventCount)) throw closed(childId)
      if (live.openTurnBefore() !== undefined) throw busy(childId)
      return this.#resumeWith(sessions, projections, live, identity, options.prompt, caller.id)
    }

    const persistence = this.#persistence(childId)
    // Authorize and classify from a non-mutating inspection, so an unauthorized
    // caller never triggers load()'s crash repair on someone else's child.
    const observation = await guardRead(signal, () => persistence.inspect(childId as SessionId, signal), childId)
    authorize(observation.header)
    const folded = projections.fold(observation.events, { inheritedEventCount: observation.inheritedEventCount }, [SUBAGENT_IDENTITY_KEY])
    const count = observation.events.length
    const identity = ownIdentity(folded[SUBAGENT_IDENTITY_KEY], (seq) => seq >= observation.inheritedEventCount && seq < count)
    if (identity?.mode !== 'continuable') throw notResumable(childId)
    if (isClosed(observation.events, observation.inheritedEventCount)) throw closed(childId)
    const loaded = await guardRead(signal, () => persistence.load(childId as SessionId, signal), childId)
    if (!sameLifecycle(loaded.header, observation.header)) {
      throw new SubagentError(
        'SUBAGENT_NOT_FOUND',
        `Subagent '${childId}' was replaced while it was being resumed; list the catalog again.`,
      )
    }
    throwIfAborted(signal, cancelled)
    if (sessions.get(childId) !== undefined || this.#busy.has(childId)) throw busy(childId)
    const child = sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
    return this.#resumeWith(sessions, projections, child, identity, options.prompt, caller.id)
  }

  /**
   * Delivers `text` to a continuable child of the live `caller`: an idle child
   * starts a run at once; a busy one queues it (logged on the child as
   * `subagent/queued`, delivered in order when the running turn ends) — never
   * an error. Unknown: `SUBAGENT_NOT_FOUND`; closed: `SUBAGENT_CLOSED`.
   */
  async send(childId: string, options: CallerOptions & { readonly text: string }, signal?: AbortSignal): Promise<SendResult> {
    this.#assertLive()
    if (typeof options.text !== 'string') throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', 'A message to a subagent must be a string.')
    const sessions = this.#sessions()
    const caller = this.#liveCaller(sessions, options.caller, 'SUBAGENT_UNAUTHORIZED')
    // Two messages racing to one cold child: the loser finds it busy and queues behind the winner.
    for (let attempt = 0; ; attempt++) {
      const queued = this.#queue(sessions, caller, childId, options.text)
      if (queued !== undefined) return queued
      try {
        const handle = await this.resume(childId, { caller, prompt: options.text }, signal)
        return { status: 'started', handle }
      } catch (error) {
        if (!isDshError(error, 'SUBAGENT_BUSY') || attempt >= 2) throw error
      }
    }
  }

  /** Queues `text` on a busy (not settling) child; `undefined` when the child is not busy. */
  #queue(sessions: SessionStore, caller: Session, childId: string, text: string): SendResult | undefined {
    const state = this.#busy.get(childId)
    const live = sessions.get(childId)
    if (state === undefined || state.settling === true || live === undefined) return undefined
    if (live.header.origin !== 'subagent' || live.header.parentSession !== caller.id) {
      throw new SubagentError(
        'SUBAGENT_UNAUTHORIZED',
        `Session '${childId}' is not a subagent of '${caller.id}'; only its parent may send it input.`,
      )
    }
    if (state.identity.mode !== 'continuable') throw notResumable(childId)
    if (state.stop === 'close') throw closed(childId)
    const event = live.append(SUBAGENT_QUEUED_EVENT, { from: caller.id, text })
    state.inbox.push({ seq: event.seq, text })
    return { status: 'queued', position: state.inbox.length }
  }

  /**
   * Aborts the child's current run (its turn ends `cancelled`; queued input is
   * still delivered afterwards). With a `caller`, only the child's parent or an
   * ancestor in its chain may do it (`SUBAGENT_UNAUTHORIZED`). Resolves true
   * once the run has settled, false when nothing was running.
   */
  async interrupt(childId: string, options?: CallerOptions): Promise<boolean> {
    if (options !== undefined) await this.#authorizeAncestor(options.caller, childId)
    const run = this.#runs.get(childId)
    if (run === undefined) return false
    run.controller.abort()
    await run.done
    return true
  }

  /**
   * Settles and closes a continuable child: interrupts a running turn, drops
   * queued input, and appends the final `subagent/end {reason:'closed'}`; the
   * child is no longer resumable. Parent or ancestor only.
   */
  async close(childId: string, options: CallerOptions, signal?: AbortSignal): Promise<CloseResult> {
    this.#assertLive()
    await this.#authorizeAncestor(options.caller, childId)
    const sessions = this.#sessions()
    const projections = this.#projections()
    const state = this.#busy.get(childId)
    if (state?.settling === true) await state.idle
    else if (state !== undefined) {
      if (state.identity.mode !== 'continuable') throw notResumable(childId)
      if (state.stop === 'close') throw closed(childId)
      state.stop = 'close'
      const dropped = state.inbox.length
      const run = this.#runs.get(childId)
      run?.controller.abort()
      await state.idle
      return { id: childId as SessionId, interrupted: run !== undefined, dropped }
    }
    const live = sessions.get(childId)
    const child = live ?? (await this.#restoreForWrite(sessions, childId, signal))
    try {
      const identity = ownIdentity(projections.snapshot(child, [SUBAGENT_IDENTITY_KEY])[SUBAGENT_IDENTITY_KEY], (seq) =>
        child.isOwnSeq(seq),
      )
      if (identity?.mode !== 'continuable') throw notResumable(childId)
      if (isClosed(child.events, child.inheritedEventCount)) throw closed(childId)
      const dropped = pendingQueued(child.events, child.inheritedEventCount).length
      child.append(SUBAGENT_END_EVENT, { reason: 'closed', ...(dropped > 0 ? { dropped } : {}) })
      return { id: child.id, interrupted: false, dropped }
    } finally {
      if (live === undefined) await this.#settle(sessions, child)
    }
  }

  /**
   * Waits until every listed child is idle (its runs and queued input done),
   * the timeout passes or `signal` aborts, then reports each: `running` (with
   * its queued count), `settled` with the last run's reason and final text,
   * `closed`, or `not-found`. Parent or ancestor only.
   */
  async wait(childIds: readonly string[], options: WaitOptions): Promise<WaitEntry[]> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_MS
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
      throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `timeoutMs must be a non-negative number, got ${String(timeoutMs)}.`)
    const known = new Set<string>()
    for (const id of childIds) {
      try {
        await this.#authorizeAncestor(options.caller, id)
        known.add(id)
      } catch (error) {
        if (!isDshError(error, 'SUBAGENT_NOT_FOUND')) throw error
      }
    }
    const idle = [...known].flatMap((id) => {
      const state = this.#busy.get(id)
      return state === undefined ? [] : [state.idle]
    })
    if (idle.length > 0) await settleWithin(Promise.all(idle), Math.min(timeoutMs, MAX_WAIT_MS), options.signal)
    throwIfAborted(options.signal, cancelled)
    const out: WaitEntry[] = []
    for (const id of childIds) out.push(known.has(id) ? await this.#status(id, options.signal) : { id, state: 'not-found' })
    return out
  }

  /**
   * A child tells its parent something: appended to the live parent as a
   * `report` notice its driver receives on its next turn.
   */
  report(agent: Session | string, text: string): SubagentNotice {
    const sessions = this.#sessions()
    const child = this.#liveCaller(sessions, agent, 'SUBAGENT_NOT_FOUND')
    if (typeof text !== 'string' || text.length === 0)
      throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', 'A report needs a non-empty text.')
    const parentId = child.header.parentSession
    if (child.header.origin !== 'subagent' || parentId === undefined) {
      throw new SubagentError('SUBAGENT_NOT_A_SUBAGENT', `Session '${child.id}' is not a subagent, so it has no parent to report to.`)
    }
    const parent = sessions.get(parentId)
    if (parent === undefined || parent.closed) {
      throw new SubagentError(
        'SUBAGENT_PARENT_NOT_LIVE',
        `The parent '${parentId}' of '${child.id}' is not live in this process; the report cannot be delivered (put it in your final message instead).`,
      )
    }
    const identity = this.#identityOfLive(child)
    const notice: SubagentNotice = {
      kind: 'report',
      child: child.id,
      ...(identity?.label === undefined ? {} : { label: identity.label }),
      text,
    }
    parent.append(SUBAGENT_NOTICE_EVENT, notice)
    return notice
  }

  /**
   * Runs one turn of a top-level (or any live, non-running) session through
   * the driver, with its pending notices and the runtime's tools. No
   * lifecycle events: those belong to children. The session stays live.
   */
  drive(session: Session | string, options: { readonly prompt?: string } = {}): SubagentHandle {
    this.#assertLive()
    const sessions = this.#sessions()
    const live = this.#liveCaller(sessions, session, 'SUBAGENT_NOT_FOUND')
    if (this.#runs.has(live.id) || this.#busy.has(live.id) || live.openTurnBefore() !== undefined) throw busy(live.id)
    const controller = new AbortController()
    if (options.prompt !== undefined) live.append('user/message', { text: options.prompt })
    const turn = nextTurn(live)
    const run: SubagentRun = {
      kind: 'drive',
      session: live,
      turn,
      notices: noticesSinceLastTurn(live),
      tools: this.#toolsFor(live, undefined),
      signal: controller.signal,
      ...(options.prompt === undefined ? {} : { prompt: options.prompt }),
    }
    const done = (async (): Promise<SubagentSettlement> => {
      await Promise.resolve()
      const outcome = await this.#runDriver(run)
      this.#runs.delete(live.id)
      return { ...outcome, end: outcome.reason }
    })()
    this.#runs.set(live.id, { session: live, controller, done })
    return { id: live.id, session: live, done }
  }

  /**
   * Drains the running children of `parentId` (their runs end `drained`,
   * queued input stays logged for a later resume) and waits for them. Their
   * settlement notices land on the parent while it is still live.
   */
  async drain(parentId: string): Promise<void> {
    const waits: Promise<void>[] = []
    for (const [id, state] of this.#busy) {
      const run = this.#runs.get(id)
      const session = run?.session ?? this.#services.get('sessions')?.get(id)
      if (session?.header.parentSession !== parentId) continue
      state.stop ??= 'drain'
      if (run !== undefined) {
        run.endReason = 'drained'
        run.controller.abort()
      }
      waits.push(state.idle)
    }
    await Promise.all(waits)
  }

  /** Drains `session`'s running children (notices still land on it), then takes it out of memory. */
  async release(session: Session | string): Promise<void> {
    const id = typeof session === 'string' ? session : session.id
    await this.drain(id)
    await this.#sessions().dispose(id)
  }

  /** True while this runtime is running a turn of `id` or has queued input for it. */
  isRunning(id: string): boolean {
    return this.#runs.has(id) || this.#busy.has(id)
  }

  /** Messages queued for a busy child in this process (0 when idle). */
  queuedCount(childId: string): number {
    return this.#busy.get(childId)?.inbox.length ?? 0
  }

  listChildren(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return listChildren(this.#catalogServices(), parentId, signal)
  }

  listDescendants(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return listDescendants(this.#catalogServices(), parentId, signal)
  }

  /** `listChildren` plus the rung that decided each row. */
  explainChildren(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return explainChildren(this.#catalogServices(), parentId, signal)
  }

  /** `listDescendants` plus rung, parent and depth per row. */
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return explainDescendants(this.#catalogServices(), parentId, signal)
  }

  /** Interrupts every run (children end `cancelled`, nothing queued is lost) and waits for them to settle. */
  async dispose(): Promise<void> {
    if (this.#disposed) return
    this.#disposed = true
    for (const state of this.#busy.values()) state.stop ??= 'drain'
    const runs = [...this.#runs.values()]
    for (const run of runs) run.controller.abort()
    await Promise.all([...runs.map((run) => run.done), ...[...this.#busy.values()].map((state) => state.idle)])
  }

  #resumeWith(
    sessions: SessionStore,
    projections: SessionProjections,
    child: Session,
    identity: SubagentIdentityProjection,
    prompt: string | undefined,
    from: string,
  ): SubagentHandle {
    const profile = projections.snapshot(child, [SUBAGENT_PROFILE_KEY])[SUBAGENT_PROFILE_KEY]
    const descriptor = profile !== null && profile !== undefined && child.isOwnSeq(profile.seq) ? profile.descriptor : undefined
    const pending = pendingQueued(child.events, child.inheritedEventCount)
    if (pending.length === 0) return this.#startChild(sessions, child, 'resume', identity, descriptor, prompt)
    // Input queued before a crash goes first, in order; the new prompt queues behind it.
    if (prompt !== undefined) {
      const event = child.append(SUBAGENT_QUEUED_EVENT, { from, text: prompt })
      pending.push({ seq: event.seq, text: prompt })
    }
    const [first, ...rest] = pending
    return this.#startChild(sessions, child, 'message', identity, descriptor, first!.text, first!.seq, rest)
  }

  #startChild(
    sessions: SessionStore,
    child: Session,
    kind: SubagentRunKind,
    identity: SubagentIdentityProjection,
    descriptor: SubagentDescriptor | undefined,
    prompt: string | undefined,
    queued?: number,
    inbox: QueuedInput[] = [],
  ): SubagentHandle {
    let state = this.#busy.get(child.id)
    if (state === undefined) {
      let resolveIdle!: () => void
      const idle = new Promise<void>((resolve) => (resolveIdle = resolve))
      state = { inbox, idle, resolveIdle, identity, descriptor }
      this.#busy.set(child.id, state)
    }
    const controller = new AbortController()
    const turn = nextTurn(child)
    child.append(SUBAGENT_START_EVENT, { kind, turn, ...(queued === undefined ? {} : { queued }) })
    if (prompt !== undefined) child.append('user/message', { text: prompt })
    const run: SubagentRun = {
      kind,
      session: child,
      identity,
      turn,
      notices: noticesSinceLastTurn(child),
      tools: this.#toolsFor(child, descriptor?.toolFilter),
      signal: controller.signal,
      ...(descriptor === undefined ? {} : { descriptor }),
      ...(prompt === undefined ? {} : { prompt }),
    }
    const active: ActiveRun = { session: child, controller, done: undefined as never }
    const done = (async (): Promise<SubagentSettlement> => {
      // Let the caller see the handle (and a live child) before the first step.
      await Promise.resolve()
      const outcome = await this.#runDriver(run)
      const settlement = this.#finishRun(child, turn, identity, descriptor, outcome, active.endReason)
      this.#runs.delete(child.id)
      await this.#afterRun(sessions, child, state)
      return settlement
    })()
    ;(active as { done: Promise<SubagentSettlement> }).done = done
    this.#runs.set(child.id, active)
    return { id: child.id, session: child, done }
  }

  /** Runs the driver; a throw becomes an `error` outcome and an open turn is closed. */
  async #runDriver(run: SubagentRun): Promise<SubagentRunOutcome> {
    let outcome: SubagentRunOutcome
    try {
      outcome = await this.#driver.run(run)
    } catch (error) {
      outcome = { reason: 'error', error }
    }
    const session = run.session
    // A driver that failed mid-turn must not leave the turn open in the log.
    const open = session.closed ? undefined : session.openTurnBefore()
    if (open !== undefined) session.append('turn/end', { turn: open, reason: outcome.reason === 'completed' ? 'error' : outcome.reason })
    return outcome
  }

  /** Logs the run's end on the child and the settlement notice on its parent. */
  #finishRun(
    child: Session,
    turn: number,
    identity: SubagentIdentityProjection,
    descriptor: SubagentDescriptor | undefined,
    outcome: SubagentRunOutcome,
    override: SubagentEndReason | undefined,
  ): SubagentSettlement {
    let settled: SubagentRunOutcome = outcome
    let end: SubagentEndReason = override ?? outcome.reason
    if (
      override === undefined &&
      outcome.reason === 'completed' &&
      identity.mode === 'one-shot' &&
      descriptor?.outputSchema !== undefined
    ) {
      const checked = checkOutput(descriptor.outputSchema, outcome.text)
      if ('error' in checked) {
        end = 'invalid-output'
        settled = { ...outcome, error: checked.error }
      } else settled = { ...outcome, output: checked.output }
    }
    const error = settled.error === undefined || end === 'completed' ? undefined : describeError(settled.error)
    const data: SubagentEndData = {
      turn,
      reason: end,
      ...(settled.text === undefined ? {} : { text: settled.text }),
      ...(error === undefined ? {} : { error }),
      ...(settled.output === undefined ? {} : { output: settled.output as never }),
    }
    if (!child.closed) child.append(SUBAGENT_END_EVENT, data)
    const { turn: _turn, ...entry } = data
    this.#settled.delete(child.id)
    this.#settled.set(child.id, { id: child.id, state: 'settled', ...entry })
    if (this.#settled.size > SETTLED_MEMORY) this.#settled.delete(this.#settled.keys().next().value!)
    const parentId = child.header.parentSession
    if (parentId !== undefined) {
      const notice: SubagentNotice = {
        kind: 'settled',
        child: child.id,
        mode: identity.mode,
        ...(identity.label === undefined ? {} : { label: identity.label }),
        reason: end,
        ...(settled.text === undefined ? {} : { text: settled.text }),
        ...(error === undefined ? {} : { error }),
      }
      const parent = this.#services.get('sessions')?.get(parentId)
      if (parent !== undefined && !parent.closed) parent.append(SUBAGENT_NOTICE_EVENT, notice)
      else if (end !== 'drained')
        this.#services
          .get('logger')
          ?.warn(`dsh: subagent '${child.id}' settled (${end}) while its parent '${parentId}' was not live; its own log records the end.`)
    }
    return { ...settled, end }
  }

  /** After a run: start the next queued message, or drain, write a final close, go cold. */
  async #afterRun(sessions: SessionStore, child: Session, state: BusyChild): Promise<void> {
    const next = state.stop === undefined && !this.#disposed ? state.inbox.shift() : undefined
    if (next !== undefined && !child.closed) {
      this.#startChild(sessions, child, 'message', state.identity, state.descriptor, next.text, next.seq)
      return
    }
    state.settling = true
    try {
      await this.drain(child.id)
      if (state.stop === 'close' && !child.closed) {
        const dropped = state.inbox.length
        child.append(SUBAGENT_END_EVENT, { reason: 'closed', ...(dropped > 0 ? { dropped } : {}) })
        this.#settled.delete(child.id)
      }
      await this.#settle(sessions, child)
    } finally {
      this.#busy.delete(child.id)
      state.resolveIdle()
    }
  }

  async #settle(sessions: SessionStore, child: Session): Promise<void> {
    if (this.#services.get('sessionPersistence') === undefined || child.closed) return
    try {
      await sessions.dispose(child.id)
    } catch (error) {
      // The child stays live and its events stay queued for retry; nothing is lost.
      this.#services.get('logger')?.warn(`dsh: subagent '${child.id}' could not go cold after its run; it stays live.`, error)
    }
  }

  /** What `wait` reports for a child that is not busy (memory first, else one read of its log). */
  async #status(id: string, signal: AbortSignal | undefined): Promise<WaitEntry> {
    const state = this.#busy.get(id)
    if (state !== undefined) return { id, state: 'running', queued: state.inbox.length }
    const live = this.#services.get('sessions')?.get(id)
    let events: readonly StoredSessionEvent[]
    let cut: number
    if (live !== undefined) {
      events = live.events
      cut = live.inheritedEventCount
    } else {
      const remembered = this.#settled.get(id)
      if (remembered !== undefined) return remembered
      const query = this.#services.get('sessionQuery')
      if (query === undefined) return { id, state: 'not-found' }
      const observation = await raceAbort(query.observeSession(id, signal), signal, cancelled).catch((error: unknown) => {
        if (isDshError(error, 'SESSION_QUERY_NOT_FOUND')) return undefined
        throw error
      })
      if (observation === undefined) return { id, state: 'not-found' }
      events = observation.events
      cut = observation.inheritedEventCount
    }
    return lastSettlement(id, events, cut)
  }

  /** The caller must be live, and the child's parent or an ancestor through `parentSession` links. */
  async #authorizeAncestor(callerRef: Session | string, childId: string): Promise<void> {
    const sessions = this.#sessions()
    const caller = this.#liveCaller(sessions, callerRef, 'SUBAGENT_UNAUTHORIZED')
    const header = await this.#headerOf(childId)
    if (header === undefined || header.origin !== 'subagent') {
      throw new SubagentError('SUBAGENT_NOT_FOUND', `There is no subagent '${childId}' (list your subagents with list_agents).`)
    }
    let current = header.parentSession
    const seen = new Set<string>([childId])
    for (let hops = 0; current !== undefined && hops < MAX_ANCESTRY && !seen.has(current); hops++) {
      if (current === caller.id) return
      seen.add(current)
      current = (await this.#headerOf(current).catch(() => undefined))?.parentSession
    }
    throw new SubagentError(
      'SUBAGENT_UNAUTHORIZED',
      `Session '${caller.id}' is neither the parent nor an ancestor of subagent '${childId}'; only they may control it.`,
    )
  }

  /** A session's header: live, else from persistence (one inspection). */
  async #headerOf(id: string): Promise<SessionHeader | undefined> {
    const live = this.#services.get('sessions')?.get(id)
    if (live !== undefined) return live.header
    const persistence = this.#services.get('sessionPersistence')
    if (persistence === undefined || typeof id !== 'string' || id.length === 0) return undefined
    try {
      return (await persistence.inspect(id as SessionId)).header
    } catch (error) {
      if (isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) return undefined
      throw error
    }
  }

  async #restoreForWrite(sessions: SessionStore, childId: string, signal: AbortSignal | undefined): Promise<Session> {
    const persistence = this.#persistence(childId)
    const loaded = await guardRead(signal, () => persistence.load(childId as SessionId, signal), childId)
    if (sessions.get(childId) !== undefined) throw busy(childId)
    return sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
  }

  #identityOfLive(session: Session): SubagentIdentityProjection | undefined {
    const projections = this.#services.get('sessionProjections')
    if (projections === undefined || !projections.keys().includes(SUBAGENT_IDENTITY_KEY)) return undefined
    return ownIdentity(projections.snapshot(session, [SUBAGENT_IDENTITY_KEY])[SUBAGENT_IDENTITY_KEY], (seq) => session.isOwnSeq(seq))
  }

  #toolsFor(session: Session, filter: SubagentToolFilter | undefined): readonly SubagentTool[] {
    const tools = this.#tools?.(session, this) ?? []
    if (filter === undefined) return Object.freeze([...tools])
    return Object.freeze(
      tools.filter((tool) => (filter.allow === undefined || filter.allow.includes(tool.name)) && !(filter.deny ?? []).includes(tool.name)),
    )
  }

  #descriptor(options: SpawnOptions): SubagentDescriptor {
    const parsed = subagentDescriptorSchema.safeParse({
      version: SUBAGENT_DESCRIPTOR_VERSION,
      mode: options.mode,
      provider: options.provider ?? this.#driver.name,
      ...(options.label === undefined ? {} : { label: options.label }),
      ...options.settings,
    })
    if (!parsed.success) {
      const why = parsed.error.issues
        .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'descriptor'}: ${issue.message}`)
        .join('; ')
      throw new SubagentError(
        'SUBAGENT_INVALID_DESCRIPTOR',
        `Cannot spawn: the subagent descriptor would be invalid (${why}). A continuable child needs a non-empty label.`,
      )
    }
    if (parsed.data.outputSchema !== undefined) compileOutputSchema(parsed.data.outputSchema)
    return parsed.data
  }

  #liveCaller(
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

  #sessions(): SessionStore {
    const sessions = this.#services.get('sessions')
    if (sessions === undefined)
      throw new SubagentError(
        'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE',
        "The subagent runtime needs the 'sessions' store; activate sessionStorePlugin first.",
      )
    return sessions
  }

  #persistence(childId: string): SessionPersistence {
    const persistence = this.#services.get('sessionPersistence')
    if (persistence === undefined) {
      throw new SubagentError(
        'SUBAGENT_PERSISTENCE_UNAVAILABLE',
        `Subagent '${childId}' is not live and there is no 'sessionPersistence' service to load it from.`,
      )
    }
    return persistence
  }

  #projections(): SessionProjections {
    const projections = this.#services.get('sessionProjections')
    if (projections === undefined || !projections.keys().includes(SUBAGENT_IDENTITY_KEY)) {
      throw new SubagentError(
        'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
        "Controlling subagents needs 'sessionProjections' with the 'subagent' unit registered; activate the projection plugin before subagentsPlugin.",
      )
    }
    return projections
  }

  #catalogServices(): SubagentCatalogServices {
    return {
      sessions: this.#services.get('sessions'),
      sessionProjections: this.#services.get('sessionProjections'),
      sessionQuery: this.#services.get('sessionQuery'),
      sessionProjectionCache: this.#services.get('sessionProjectionCache'),
    }
  }

  #assertLive(): void {
    if (this.#disposed) throw new SubagentError('SUBAGENT_DISPOSED', 'This subagent runtime has been disposed; activate a new one.')
  }
}

function ownIdentity(
  identity: SubagentIdentityProjection | null | undefined,
  isOwn: (seq: number) => boolean,
): SubagentIdentityProjection | undefined {
  return identity !== null && identity !== undefined && isOwn(identity.seq) ? identity : undefined
}

function busy(childId: string): SubagentError {
  return new SubagentError(
    'SUBAGENT_BUSY',
    `Subagent '${childId}' is running a turn; wait for it (or interrupt it), or send it a message to queue.`,
  )
}

function closed(childId: string): SubagentError {
  return new SubagentError('SUBAGENT_CLOSED', `Subagent '${childId}' has been closed and cannot run again; start a new subagent instead.`)
}

function notResumable(childId: string): SubagentError {
  return new SubagentError(
    'SUBAGENT_NOT_RESUMABLE',
    `Subagent '${childId}' is not continuable (it is one-shot, or its own descriptor is missing or invalid); spawn a new child instead.`,
  )
}

function describeError(error: unknown): string {
  if (isDshError(error)) return `${error.code}: ${error.message}`
  return error instanceof Error ? error.message : String(error)
}

/** True when the own suffix holds the final `subagent/end {reason:'closed'}`. */
function isClosed(events: readonly StoredSessionEvent[], cut: number): boolean {
  for (let i = events.length - 1; i >= cut; i--) {
    const event = events[i]!
    if (event.type === SUBAGENT_END_EVENT && (event.data as { reason?: unknown } | null)?.reason === 'closed') return true
  }
  return false
}

/** Own `subagent/queued` inputs that no `subagent/start` has delivered yet, in order. */
function pendingQueued(events: readonly StoredSessionEvent[], cut: number): QueuedInput[] {
  const delivered = new Set<number>()
  const queued: QueuedInput[] = []
  for (let i = cut; i < events.length; i++) {
    const event = events[i]!
    const data = event.data as { queued?: unknown; text?: unknown } | null
    if (event.type === SUBAGENT_START_EVENT && typeof data?.queued === 'number') delivered.add(data.queued)
    else if (event.type === SUBAGENT_QUEUED_EVENT && typeof data?.text === 'string') queued.push({ seq: event.seq, text: data.text })
  }
  return queued.filter((input) => !delivered.has(input.seq))
}

/** The notices appended to `session`'s own log since its last `turn/start`. */
function noticesSinceLastTurn(session: Session): SubagentNotice[] {
  const notices: SubagentNotice[] = []
  for (let seq = session.seq - 1; seq >= session.inheritedEventCount; seq--) {
    const event = session.eventAt(seq)!
    if (event.type === 'turn/start') break
    if (event.type === SUBAGENT_NOTICE_EVENT) notices.push(event.data as SubagentNotice)
  }
  return notices.reverse()
}

/** A settled child's last run as its log records it (a crash-repaired run reports its `turn/end`). */
function lastSettlement(id: string, events: readonly StoredSessionEvent[], cut: number): WaitEntry {
  let text: string | undefined
  let turnReason: string | undefined
  for (let i = events.length - 1; i >= cut; i--) {
    const event = events[i]!
    const data = event.data as Record<string, unknown> | null
    if (event.type === SUBAGENT_END_EVENT) {
      if (data?.reason === 'closed') return { id, state: 'closed' }
      const end = data as unknown as SubagentEndData
      return {
        id,
        state: 'settled',
        reason: end.reason,
        ...(end.text === undefined ? {} : { text: end.text }),
        ...(end.error === undefined ? {} : { error: end.error }),
        ...(end.output === undefined ? {} : { output: end.output }),
      }
    }
    if (event.type === 'turn/end' && turnReason === undefined) turnReason = String(data?.reason)
    if (event.type === 'assistant/message' && text === undefined && turnReason !== undefined) text = String(data?.text)
    if (event.type === SUBAGENT_START_EVENT && turnReason !== undefined) break
  }
  return {
    id,
    state: 'settled',
    ...(turnReason === undefined ? {} : { reason: turnReason as SubagentEndReason }),
    ...(text === undefined ? {} : { text }),
  }
}

/** Resolves when `promise` settles, `ms` pass, or `signal` aborts — whichever is first. */
async function settleWithin(promise: Promise<unknown>, ms: number, signal: AbortSignal | undefined): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  let onAbort: (() => void) | undefined
  try {
    await Promise.race([
      promise,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms)
      }),
      new Promise<void>((resolve) => {
        if (signal === undefined) return
        if (signal.aborted) resolve()
        onAbort = () => resolve()
        signal.addEventListener('abort', onAbort, { once: true })
      }),
    ])
  } finally {
    clearTimeout(timer)
    if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort)
  }
}

async function guardRead<T>(signal: AbortSignal | undefined, op: () => Promise<T>, childId: string): Promise<T> {
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

/** The latest cut of `session` that is not inside an open turn (a parent mid-turn forks before that turn). */
export function latestClosedCut(session: Session): number {
  let cut: number = session.seq
  for (let open = session.openTurnBefore(cut); open !== undefined; open = session.openTurnBefore(cut)) {
    let start = cut - 1
    while (start > 0) {
      const event = session.eventAt(start)
      if (event?.type === 'turn/start' && (event.data as { turn?: unknown }).turn === open) break
      start--
    }
    cut = Math.max(0, start)
  }
  return cut
}

/** One above the highest turn number anywhere in the log (inherited turns included). */
function nextTurn(session: Session): number {
  let max = 0
  for (const event of session.events) {
    if (event.type === 'turn/start' && typeof event.data.turn === 'number' && event.data.turn > max) max = event.data.turn
  }
  return max + 1
}

declare module '@dsh/context' {
  interface Services {
    subagents: SubagentRuntime
  }
}

/**
 * Provides service `subagents` and registers the `subagent`,
 * `subagentTiming` and `subagentProfile` units. It declares what it needs:
 * `sessions`, `sessionProjections` and `sessionQuery` are required, so a
 * missing one fails at activation with `CONTEXT_SERVICE_UNAVAILABLE`;
 * `sessionPersistence` and `sessionProjectionCache` are optional (looked up per
 * operation; without persistence a cold resume fails with
 * `SUBAGENT_PERSISTENCE_UNAVAILABLE`). A session disposed while its children
 * run drains them.
 */
export const subagentsPlugin = (options: SubagentRuntimeOptions) =>
  definePlugin({
    name: 'subagents',
    inject: { required: ['sessions', 'sessionProjections', 'sessionQuery'], optional: ['sessionPersistence', 'sessionProjectionCache'] },
    activate(ctx) {
      const runtime = new SubagentRuntime(ctx, options)
      ctx.onDispose(registerSubagentUnits(ctx.sessionProjections))
      ctx.provide('subagents', runtime)
      ctx.onDispose(ctx.on('session/disposed', (session) => void runtime.drain(session.id)))
      // Registered last so it runs first on disposal: runs settle (and children
      // flush) while persistence is still open.
      ctx.onDispose(() => runtime.dispose())
    },
  })
