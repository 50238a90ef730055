import { definePlugin, isDshError, raceAbort, throwIfAborted, type Services } from '@dsh/context'
import { sameLifecycle, type Session, type SessionId, type SessionStore } from '@dsh/session'
import type { SessionProjections } from '@dsh/session-projection'
import { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION, subagentDescriptorSchema, type SubagentDescriptor, type SubagentMode, type SubagentSettings } from './descriptor.js'
import type { SubagentDriver, SubagentRunOutcome } from './driver.js'
import { cancelled, SubagentError } from './errors.js'
import { explainChildren, explainDescendants, listChildren, listDescendants } from './list-children.js'
import type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry } from './list-types.js'
import { registerSubagentUnits, SUBAGENT_IDENTITY_KEY } from './projection.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/** How deep delegation may go when `maxDepth` is not given: a top-level session is depth 0. */
export const DEFAULT_MAX_DEPTH = 3

export interface SubagentRuntimeOptions {
  readonly driver: SubagentDriver
  /** The deepest `delegationDepth` a child may have (default 3); deeper spawns fail with `SUBAGENT_DEPTH_EXCEEDED`. */
  readonly maxDepth?: number
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
  /** Optional continuable settings written into the descriptor. */
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

export interface SubagentHandle {
  readonly id: SessionId
  /** The live child session (it goes cold when the run settles, if persistence is present). */
  readonly session: Session
  /** Settles when the run ends and the child has settled; never rejects. */
  readonly done: Promise<SubagentRunOutcome>
}

/** Where the runtime looks up services at call time (a `Context` fits). */
export interface SubagentServiceSource {
  get<K extends keyof Services & string>(name: K): Services[K] | undefined
}

interface ActiveRun {
  readonly controller: AbortController
  readonly done: Promise<SubagentRunOutcome>
}

/**
 * Spawns, resumes and interrupts subagents, and lists a parent's catalog
 * (service `subagents`). Services are looked up when an operation runs, so a
 * missing one fails that operation with its code rather than at activation.
 *
 * After a run settles the child goes cold (`sessions.dispose`: flushed, then
 * out of memory) when a `sessionPersistence` service is present; without one
 * it stays live, since there is nowhere cold for it to go.
 */
export class SubagentRuntime {
  readonly #services: SubagentServiceSource
  readonly #driver: SubagentDriver
  readonly #maxDepth: number
  readonly #runs = new Map<string, ActiveRun>()
  #disposed = false

  constructor(services: SubagentServiceSource, options: SubagentRuntimeOptions) {
    const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
    if (!Number.isSafeInteger(maxDepth) || maxDepth < 0) {
      throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `maxDepth must be a non-negative integer, got ${String(maxDepth)}.`)
    }
    this.#services = services
    this.#driver = options.driver
    this.#maxDepth = maxDepth
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
    const parentSession = this.#liveParent(sessions, parent)
    const depth = parentSession.header.delegationDepth + 1
    if (depth > this.#maxDepth) {
      throw new SubagentError('SUBAGENT_DEPTH_EXCEEDED', `Session '${parentSession.id}' is at delegation depth ${parentSession.header.delegationDepth}; a child would be at depth ${depth}, beyond this runtime's maxDepth of ${this.#maxDepth}.`, {
        details: { parent: parentSession.id, depth, maxDepth: this.#maxDepth },
      })
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
        ? sessions.fork(parentSession, { ...common, boundary: options.boundary ?? latestClosedCut(parentSession), ...(options.id === undefined ? {} : { childId: options.id }) })
        : sessions.create({ ...common, parentSession: parentSession.id, ...(options.id === undefined ? {} : { id: options.id }) })
    const event = child.append(SUBAGENT_DESCRIPTOR_EVENT, descriptor)
    const identity: SubagentIdentityProjection =
      descriptor.mode === 'continuable'
        ? { mode: 'continuable', label: descriptor.label, seq: event.seq }
        : { mode: 'one-shot', seq: event.seq, ...(descriptor.label === undefined ? {} : { label: descriptor.label }) }
    return this.#start(sessions, child, 'spawn', identity, descriptor, options.prompt)
  }

  /**
   * Runs another turn of a continuable child. The caller must be the child's
   * live parent (`SUBAGENT_UNAUTHORIZED`); the child must be continuable by its
   * own descriptor (`SUBAGENT_NOT_RESUMABLE`) and idle (`SUBAGENT_BUSY`). A cold
   * child is inspected first (no mutation), then loaded and restored.
   */
  async resume(childId: string, options: ResumeOptions, signal?: AbortSignal): Promise<SubagentHandle> {
    this.#assertLive()
    throwIfAborted(signal, cancelled)
    const sessions = this.#sessions()
    const projections = this.#projections()
    const callerId = typeof options.caller === 'string' ? options.caller : options.caller.id
    const caller = sessions.get(callerId)
    if (caller === undefined || (typeof options.caller !== 'string' && caller !== options.caller)) {
      throw new SubagentError('SUBAGENT_UNAUTHORIZED', `Only the live parent may resume a subagent; caller '${callerId}' is not live in this process.`)
    }
    const authorize = (header: Session['header']): void => {
      if (header.origin !== 'subagent' || header.parentSession !== caller.id) {
        throw new SubagentError('SUBAGENT_UNAUTHORIZED', `Session '${childId}' is not a subagent of '${caller.id}'; only its parent may resume it.`)
      }
    }
    const notResumable = (): SubagentError =>
      new SubagentError('SUBAGENT_NOT_RESUMABLE', `Subagent '${childId}' is not continuable (it is one-shot, or its own descriptor is missing or invalid); spawn a new child instead.`)

    const live = sessions.get(childId)
    if (live !== undefined) {
      authorize(live.header)
      const identity = ownIdentity(projections.snapshot(live, [SUBAGENT_IDENTITY_KEY])[SUBAGENT_IDENTITY_KEY], (seq) => live.isOwnSeq(seq))
      if (identity?.mode !== 'continuable') throw notResumable()
      if (this.#runs.has(childId) || live.openTurnBefore() !== undefined) throw busy(childId)
      return this.#start(sessions, live, 'resume', identity, undefined, options.prompt)
    }

    const persistence = this.#services.get('sessionPersistence')
    if (persistence === undefined) {
      throw new SubagentError('SUBAGENT_PERSISTENCE_UNAVAILABLE', `Subagent '${childId}' is not live and there is no 'sessionPersistence' service to load it from.`)
    }
    if (this.#runs.has(childId)) throw busy(childId)
    // Authorize and classify from a non-mutating inspection, so an unauthorized
    // caller never triggers load()'s crash repair on someone else's child.
    const observation = await guardRead(signal, () => persistence.inspect(childId as SessionId, signal), childId)
    authorize(observation.header)
    const folded = projections.fold(observation.events, { inheritedEventCount: observation.inheritedEventCount }, [SUBAGENT_IDENTITY_KEY])
    const count = observation.events.length
    const identity = ownIdentity(folded[SUBAGENT_IDENTITY_KEY], (seq) => seq >= observation.inheritedEventCount && seq < count)
    if (identity?.mode !== 'continuable') throw notResumable()
    const loaded = await guardRead(signal, () => persistence.load(childId as SessionId, signal), childId)
    if (!sameLifecycle(loaded.header, observation.header)) {
      throw new SubagentError('SUBAGENT_NOT_FOUND', `Subagent '${childId}' was replaced while it was being resumed; list the catalog again.`)
    }
    throwIfAborted(signal, cancelled)
    if (sessions.get(childId) !== undefined || this.#runs.has(childId)) throw busy(childId)
    const child = sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
    return this.#start(sessions, child, 'resume', identity, undefined, options.prompt)
  }

  /** Aborts the child's run; resolves true once it has settled, false when it was not running. */
  async interrupt(childId: string): Promise<boolean> {
    const run = this.#runs.get(childId)
    if (run === undefined) return false
    run.controller.abort()
    await run.done
    return true
  }

  /** True while this runtime is running a turn of `childId`. */
  isRunning(childId: string): boolean {
    return this.#runs.has(childId)
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

  /** Interrupts every run and waits for the children to settle. */
  async dispose(): Promise<void> {
    if (this.#disposed) return
    this.#disposed = true
    const runs = [...this.#runs.values()]
    for (const run of runs) run.controller.abort()
    await Promise.all(runs.map((run) => run.done))
  }

  #start(sessions: SessionStore, child: Session, kind: 'spawn' | 'resume', identity: SubagentIdentityProjection, descriptor: SubagentDescriptor | undefined, prompt: string | undefined): SubagentHandle {
    const controller = new AbortController()
    if (prompt !== undefined) child.append('user/message', { text: prompt })
    const turn = nextTurn(child)
    const run = {
      kind,
      session: child,
      identity,
      turn,
      signal: controller.signal,
      ...(descriptor === undefined ? {} : { descriptor }),
      ...(prompt === undefined ? {} : { prompt }),
    }
    const done = (async (): Promise<SubagentRunOutcome> => {
      // Let the caller see the handle (and a live child) before the first step.
      await Promise.resolve()
      let outcome: SubagentRunOutcome
      try {
        outcome = await this.#driver.run(run)
      } catch (error) {
        outcome = { reason: 'error', error }
      }
      // A driver that failed mid-turn must not leave the turn open in the log.
      const open = child.closed ? undefined : child.openTurnBefore()
      if (open !== undefined) child.append('turn/end', { turn: open, reason: outcome.reason === 'completed' ? 'error' : outcome.reason })
      await this.#settle(sessions, child)
      this.#runs.delete(child.id)
      return outcome
    })()
    this.#runs.set(child.id, { controller, done })
    return { id: child.id, session: child, done }
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

  #descriptor(options: SpawnOptions): SubagentDescriptor {
    if (options.settings !== undefined && options.mode !== 'continuable') {
      throw new SubagentError('SUBAGENT_INVALID_DESCRIPTOR', 'Settings apply to continuable subagents only; drop them or spawn with mode: continuable.')
    }
    const parsed = subagentDescriptorSchema.safeParse({
      version: SUBAGENT_DESCRIPTOR_VERSION,
      mode: options.mode,
      provider: options.provider ?? this.#driver.name,
      ...(options.label === undefined ? {} : { label: options.label }),
      ...options.settings,
    })
    if (!parsed.success) {
      const why = parsed.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'descriptor'}: ${issue.message}`).join('; ')
      throw new SubagentError('SUBAGENT_INVALID_DESCRIPTOR', `Cannot spawn: the subagent descriptor would be invalid (${why}). A continuable child needs a non-empty label.`)
    }
    return parsed.data
  }

  #liveParent(sessions: SessionStore, parent: Session | string): Session {
    const id = typeof parent === 'string' ? parent : parent.id
    const live = sessions.get(id)
    if (live === undefined || (typeof parent !== 'string' && live !== parent)) {
      throw new SubagentError('SUBAGENT_PARENT_NOT_LIVE', `Cannot spawn from '${id}': the parent must be live in this process (restore it first).`)
    }
    return live
  }

  #sessions(): SessionStore {
    const sessions = this.#services.get('sessions')
    if (sessions === undefined) throw new SubagentError('SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE', "The subagent runtime needs the 'sessions' store; activate sessionStorePlugin first.")
    return sessions
  }

  #projections(): SessionProjections {
    const projections = this.#services.get('sessionProjections')
    if (projections === undefined || !projections.keys().includes(SUBAGENT_IDENTITY_KEY)) {
      throw new SubagentError('SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE', "Resuming needs 'sessionProjections' with the 'subagent' unit registered; activate the projection plugin before subagentsPlugin.")
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

function ownIdentity(identity: SubagentIdentityProjection | null | undefined, isOwn: (seq: number) => boolean): SubagentIdentityProjection | undefined {
  return identity !== null && identity !== undefined && isOwn(identity.seq) ? identity : undefined
}

function busy(childId: string): SubagentError {
  return new SubagentError('SUBAGENT_BUSY', `Subagent '${childId}' is running a turn; wait for it (or interrupt it) before resuming.`)
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
 * Provides service `subagents` and registers the `subagent` and
 * `subagentTiming` units in `sessionProjections` (when present at activation).
 * Every other service is looked up per operation, so listing without a query
 * backend fails with `SUBAGENT_CONTROL_QUERY_UNAVAILABLE` rather than at activation.
 */
export const subagentsPlugin = (options: SubagentRuntimeOptions) =>
  definePlugin({
    name: 'subagents',
    inject: { optional: ['sessionProjections'] },
    activate(ctx) {
      const runtime = new SubagentRuntime(ctx, options)
      if (ctx.sessionProjections !== undefined) ctx.onDispose(registerSubagentUnits(ctx.sessionProjections))
      ctx.provide('subagents', runtime)
      // Registered last so it runs first on disposal: runs settle (and children
      // flush) while persistence is still open.
      ctx.onDispose(() => runtime.dispose())
    },
  })
