import type { Session } from '@dsh/session'
import type { ProjectionKey } from '@dsh/session-projection'
import type { SubagentStepPricer } from './budget.js'
import { observeBudget } from './budget-guard.js'
import { SubagentCatalog } from './catalog.js'
import type { SubagentCatalogOptions } from './catalog-options.js'
import { closeChild, driveSession, interruptChild, reportToParent, waitFor } from './control.js'
import { RuntimeCore } from './core.js'
import type { SubagentDriver, SubagentTool } from './driver.js'
import { SubagentError } from './errors.js'
import type { SubagentNotice } from './lifecycle.js'
import type { ExplainedSubagentEntry, SubagentListEntry } from './list-types.js'
import { loadOutputChecks } from './output-checks.js'
import { resumeChild, sendToChild } from './resume.js'
import { drain, resumeWaiting } from './runs.js'
import {
  type CallerOptions,
  type CloseResult,
  DEFAULT_MAX_DEPTH,
  type InterruptOptions,
  type ResumeOptions,
  type SendResult,
  type SpawnOptions,
  type SubagentHandle,
  type SubagentServiceSource,
  type WaitEntry,
  type WaitOptions,
} from './runtime-types.js'
import { loadSpawnSchemas } from './schema-loader.js'
import { spawnChild } from './spawn.js'
import type { TreeSnapshotEntry, TreeSnapshotOptions } from './tree-snapshots.js'

/** Gives an agent its tools for one run (the runtime narrows them by the child's `toolFilter`). */
export type SubagentToolProvider = (agent: Session, runtime: SubagentRuntime) => readonly SubagentTool[]

export interface SubagentRuntimeOptions extends SubagentCatalogOptions {
  readonly driver: SubagentDriver
  /** The deepest `delegationDepth` a child may have (default 3); deeper spawns fail with `SUBAGENT_DEPTH_EXCEEDED`. */
  readonly maxDepth?: number
  /** The tools every run may call (e.g. `subagentControlTools` from `@dsh/tool-subagent-control`). */
  readonly tools?: SubagentToolProvider
  /**
   * A runtime of a read-only host: it lists children, and spawn, resume and
   * send fail with `SUBAGENT_READ_ONLY`. It never loads the `outputSchema`
   * checks (classic zod), so a listing process stays small.
   */
  readonly readOnly?: boolean
  /**
   * Prices the model calls cost budgets count, from a price table of
   * `@dsh/session-stats` (`@dsh/host` builds it from `prices`); without it a
   * spawn with a cost budget is refused.
   */
  readonly pricing?: SubagentStepPricer
  /** The clock wall budgets are measured on, in epoch ms (default `Date.now`); tests inject one and advance it. */
  readonly clock?: () => number
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
 *   turn ends; a crash, a drain or a parking interrupt leaves it in the log
 *   and the next send or resume delivers it first.
 * - A parent hears of every settled run of a live child (`subagent/notice`);
 *   a parent that goes away first drains its running children (`drained`).
 * - A continuable child whose run ends while subagents it started are still
 *   running stays busy and live (`isWaiting`): each of their settlements
 *   wakes it for another run, in order with its queued input. A one-shot
 *   child's end, and a stopped chain (close, a parking interrupt, a budget,
 *   a drain from above, disposal), drain them instead.
 * - Only a child's parent may resume it or send it input; only its parent or
 *   an ancestor may interrupt, wait for or close it.
 * - Services are looked up per call: spawn, resume and send need no query
 *   backend; a listing without one fails with `SUBAGENT_CONTROL_QUERY_UNAVAILABLE`.
 *
 * After its runs settle a child goes cold (`sessions.dispose`) when a
 * `sessionPersistence` service is present; without one it stays live. The
 * operations themselves live in `spawn.ts`, `resume.ts`, `control.ts` and
 * `runs.ts`; this class holds their shared state and is the public face.
 */
export class SubagentRuntime {
  readonly #core: RuntimeCore
  readonly #catalog: SubagentCatalog
  readonly #unobserve: (() => void) | undefined

  /** Checks the options (`SUBAGENT_INVALID_OPTIONS`), so a plugin fails at activation. */
  constructor(services: SubagentServiceSource, options: SubagentRuntimeOptions) {
    const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
    if (!Number.isSafeInteger(maxDepth) || maxDepth < 0) {
      throw new SubagentError('SUBAGENT_INVALID_OPTIONS', `maxDepth must be a non-negative integer, got ${String(maxDepth)}.`, {
        details: { option: 'maxDepth' },
      })
    }
    this.#catalog = new SubagentCatalog(
      () => ({
        sessions: services.get('sessions'),
        sessionProjections: services.get('sessionProjections'),
        sessionQuery: services.get('sessionQuery'),
        sessionProjectionCache: services.get('sessionProjectionCache'),
      }),
      options,
    )
    if (options.pricing !== undefined && typeof options.pricing !== 'function') {
      throw new SubagentError('SUBAGENT_INVALID_OPTIONS', 'pricing must be a function pricing one model call.', {
        details: { option: 'pricing' },
      })
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new SubagentError('SUBAGENT_INVALID_OPTIONS', 'clock must be a function returning epoch milliseconds.', {
        details: { option: 'clock' },
      })
    }
    const tools = options.tools
    const core = new RuntimeCore(services, options.driver, maxDepth, (session) => tools?.(session, this) ?? [], options.readOnly === true, {
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.pricing === undefined ? {} : { pricing: options.pricing }),
    })
    this.#core = core
    this.#unobserve = services.on?.('session/event', (session, event) => observeBudget(core, session, event))
    core.budgetsObserved = this.#unobserve !== undefined
  }

  /**
   * Resolves once the runtime can spawn with settings and an `outputSchema`:
   * it loads the spawn schemas (zod/mini) and the checks that compile an
   * `outputSchema` (classic zod), modules of their own, which `spawn` needs
   * synchronously. `subagentsPlugin` awaits it at activation; a read-only
   * runtime loads nothing, so a listing loads no zod.
   */
  async ready(): Promise<void> {
    if (!this.#core.readOnly) await Promise.all([loadOutputChecks(), loadSpawnSchemas()])
  }

  get maxDepth(): number {
    return this.#core.maxDepth
  }

  /** How many children a listing classifies at once (`coldReadConcurrency`, default 4). */
  get coldReadConcurrency(): number {
    return this.#catalog.coldReadConcurrency
  }

  /**
   * Creates a child of the live `parent` (origin `subagent`, depth + 1),
   * appends its descriptor (and its options) as its first own events, then
   * runs it through the driver in the background. Synchronous: the child is
   * live on return.
   */
  spawn(parent: Session | string, options: SpawnOptions): SubagentHandle {
    return spawnChild(this.#core, parent, options)
  }

  /**
   * Runs another turn of a continuable child. The caller must be the child's
   * live parent (`SUBAGENT_UNAUTHORIZED`); the child must be continuable by its
   * own descriptor (`SUBAGENT_NOT_RESUMABLE`), not closed (`SUBAGENT_CLOSED`)
   * and idle (`SUBAGENT_BUSY`; `send` queues instead) — a child waiting for
   * subagents of its own is idle.
   */
  resume(childId: string, options: ResumeOptions, signal?: AbortSignal): Promise<SubagentHandle> {
    return resumeChild(this.#core, childId, options, signal)
  }

  /**
   * Delivers `text` to a continuable child of the live `caller`: an idle child
   * starts a run at once; a busy one queues it (logged on the child as
   * `subagent/queued`) — never an error. Unknown: `SUBAGENT_NOT_FOUND`;
   * closed: `SUBAGENT_CLOSED`.
   */
  send(childId: string, options: CallerOptions & { readonly text: string }, signal?: AbortSignal): Promise<SendResult> {
    return sendToChild(this.#core, childId, options, signal)
  }

  /**
   * Aborts the child's current run (it ends `cancelled`); with a `caller`,
   * parent or ancestor only. Queued input still runs afterwards (and a
   * continuable child goes on waiting for its own running subagents) unless
   * `queued: 'park'` stops the chain: its subagents are drained and its
   * queued input kept for the next send or resume, which delivers it first. True when a run was in progress (resolved once it settled, or with
   * `until: 'requested'` as soon as the stop is requested); false when none
   * was, and nothing changes.
   */
  interrupt(childId: string, options?: InterruptOptions): Promise<boolean> {
    return interruptChild(this.#core, childId, options)
  }

  /** Interrupts, drops queued input, drains its subagents and writes the final `subagent/end {reason:'closed'}`. Parent or ancestor only. */
  close(childId: string, options: CallerOptions, signal?: AbortSignal): Promise<CloseResult> {
    return closeChild(this.#core, childId, options, signal)
  }

  /** Waits until the children are idle (or the timeout), then reports each. Parent or ancestor only. */
  wait(childIds: readonly string[], options: WaitOptions): Promise<WaitEntry[]> {
    return waitFor(this.#core, childIds, options)
  }

  /** A child tells its live parent something (a `report` notice). */
  report(agent: Session | string, text: string): SubagentNotice {
    return reportToParent(this.#core, agent, text)
  }

  /** One turn of a live, idle session through the driver (no lifecycle events). */
  drive(session: Session | string, options: { readonly prompt?: string } = {}): SubagentHandle {
    return driveSession(this.#core, session, options)
  }

  /** Drains the running children of `parentId` (they end `drained`) and waits for them. */
  drain(parentId: string): Promise<void> {
    return drain(this.#core, parentId)
  }

  /** Drains `session`'s running children (notices still land on it), then takes it out of memory. */
  async release(session: Session | string): Promise<void> {
    const id = typeof session === 'string' ? session : session.id
    await this.drain(id)
    await this.#core.sessions().dispose(id)
  }

  /**
   * True while this runtime is running a turn of `id` or has queued input for
   * it; false while it only waits for subagents of its own (`isWaiting`).
   */
  isRunning(id: string): boolean {
    return this.#core.runs.has(id) || (this.#core.busy.has(id) && this.#core.busy.get(id)!.waiting !== true)
  }

  /**
   * True while the continuable child `id` is between runs, live, waiting for
   * subagents it started: each of their settlements wakes it for another run
   * (and another settlement notice to its parent), and a send or resume
   * starts one at once.
   */
  isWaiting(id: string): boolean {
    return this.#core.busy.get(id)?.waiting === true
  }

  /** Messages queued for a busy child in this process (0 when idle). */
  queuedCount(childId: string): number {
    return this.#core.busy.get(childId)?.inbox.length ?? 0
  }

  listChildren(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return this.#catalog.listChildren(parentId, signal)
  }

  listDescendants(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return this.#catalog.listDescendants(parentId, signal)
  }

  /** `listChildren` plus the rung that decided each row. */
  explainChildren(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return this.#catalog.explainChildren(parentId, signal)
  }

  /** `listDescendants` plus rung, parent and depth per row. */
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return this.#catalog.explainDescendants(parentId, signal)
  }

  /** Projection values of a session and, with `descendants`, of every session below it, through the catalog's ladder. */
  treeSnapshots(rootId: string, keys: readonly ProjectionKey[], options?: TreeSnapshotOptions): Promise<TreeSnapshotEntry[]> {
    return this.#catalog.treeSnapshots(rootId, keys, options)
  }

  /** Interrupts every run (children end `cancelled`, nothing queued is lost), ends every waiting chain, and waits for them to settle. */
  async dispose(): Promise<void> {
    const core = this.#core
    if (core.disposed) return
    core.disposed = true
    this.#unobserve?.()
    const busy = [...core.busy.values()]
    for (const state of busy) state.stop ??= 'drain'
    const runs = [...core.runs.values()]
    for (const run of runs) run.controller.abort()
    for (const state of busy) resumeWaiting(core, state)
    await Promise.all([...runs.map((run) => run.done), ...busy.map((state) => state.idle)])
  }
}
