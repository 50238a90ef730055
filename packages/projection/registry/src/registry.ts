import { type Context, consoleLogger, type Logger } from '@dsh/context'
import type { Session, SessionLogOffset, SessionSeqCursor, StoredSessionEvent } from '@dsh/session'
import { SessionProjectionError } from './errors.js'
import { foldDetached } from './fold.js'
import type {
  ProjectionChange,
  ProjectionCheckpointRow,
  ProjectionCheckpointRows,
  ProjectionKey,
  ProjectionMetrics,
  ProjectionSnapshot,
  SessionProjections,
  SessionProjectionUnit,
} from './types.js'
import { type ErasedUnit, validateUnit } from './unit.js'
import { viewRows } from './view-checkpoint.js'

/** Marks "no value" inside the registry (`undefined` can be a legitimate view). */
const ABSENT: unique symbol = Symbol('absent')
const NO_VIEW: unique symbol = Symbol('no view computed yet')

/** One unit's watermark for one live session. */
interface Cell {
  state: unknown
  /** The last seq folded into `state` (-1 before the first event). */
  observedSeq: number
  /**
   * Set when `init` or `apply` threw. Permanent for this session's cell: the
   * fold is deterministic, so every later state would be built on a state we
   * do not have, and the value stays absent until the session is made live
   * again or the unit is registered anew.
   */
  failed: boolean
  /** The state `view` was last computed for, so each state is viewed once. */
  viewOf: unknown
  view: unknown
  viewWarned: boolean
}

interface Entry {
  readonly unit: ErasedUnit
  refs: number
  /** Weak, so a session that is never disposed (or never lived in a store) cannot leak cells. */
  readonly cells: WeakMap<Session, Cell>
}

export interface ProjectionRegistryOptions {
  /** Where unit failures are reported; defaults to the context's `logger` service, then the console. */
  readonly logger?: Logger
}

/**
 * The unit registry and its watermark cache. Live cells advance on
 * `session/event`, are built lazily from the in-memory log the first time a
 * session/unit pair is needed, and are dropped on `session/disposed`.
 */
export class ProjectionRegistry implements SessionProjections {
  readonly #units = new Map<string, Entry>()
  readonly #changeListeners = new Set<(change: ProjectionChange) => void>()
  readonly #coldListeners = new Set<(session: Session, rows: ProjectionCheckpointRows) => unknown>()
  readonly #ctx: Context | undefined
  readonly #logger: Logger | undefined
  readonly #unsubscribe: Array<() => void> = []
  readonly #metrics: ProjectionMetrics = { applies: 0, lazyFolds: 0, logReads: 0, views: 0, failures: 0, detachedApplies: 0 }

  /** With a context, the registry follows its sessions' events; without one, cells only advance lazily. */
  constructor(ctx?: Context, options: ProjectionRegistryOptions = {}) {
    this.#ctx = ctx
    this.#logger = options.logger
    if (ctx) {
      this.#unsubscribe.push(
        ctx.on('session/event', (session, event) => this.#observe(session, event)),
        ctx.on('session/disposed', (session) => this.#retire(session)),
      )
    }
  }

  get metrics(): Readonly<ProjectionMetrics> {
    return this.#metrics
  }

  register<K extends ProjectionKey>(input: SessionProjectionUnit<K>): () => void {
    const unit = validateUnit(input)
    let entry = this.#units.get(unit.key)
    if (entry) {
      if (entry.unit.stateVersion !== unit.stateVersion) {
        throw new SessionProjectionError(
          'SESSION_PROJECTION_VERSION_CONFLICT',
          `Projection unit '${unit.key}' is already registered with stateVersion ${entry.unit.stateVersion}; refusing stateVersion ${unit.stateVersion}. Dispose the other registration first, or register the same version.`,
          { details: { key: unit.key, registered: entry.unit.stateVersion, requested: unit.stateVersion } },
        )
      }
      entry.refs++
    } else {
      entry = { unit, refs: 1, cells: new WeakMap() }
      this.#units.set(unit.key, entry)
    }
    const registered = entry
    let released = false
    return () => {
      if (released) return
      released = true
      registered.refs--
      if (registered.refs === 0 && this.#units.get(registered.unit.key) === registered) this.#units.delete(registered.unit.key)
    }
  }

  keys(): ProjectionKey[] {
    return [...this.#units.keys()] as ProjectionKey[]
  }

  stateVersionOf(key: string): number | undefined {
    return this.#units.get(key)?.unit.stateVersion
  }

  snapshot(session: Session, keys?: readonly ProjectionKey[]): ProjectionSnapshot {
    const out: Record<string, unknown> = {}
    for (const entry of this.#entries(keys)) {
      const view = this.#view(entry, session, this.#cell(entry, session, session.seq - 1))
      if (view !== ABSENT) out[entry.unit.key] = view
    }
    return Object.freeze(out) as ProjectionSnapshot
  }

  checkpoint(session: Session, keys?: readonly ProjectionKey[]): ProjectionCheckpointRows {
    const rows: Record<string, ProjectionCheckpointRow> = {}
    for (const entry of this.#entries(keys)) rows[entry.unit.key] = rowOf(entry, this.#cell(entry, session, session.seq - 1))
    return Object.freeze(rows)
  }

  viewCheckpoint(rows: ProjectionCheckpointRows, keys?: readonly ProjectionKey[]): ProjectionSnapshot {
    return viewRows(
      rows,
      this.#entries(keys).map((entry) => entry.unit),
    )
  }

  fold(
    events: readonly StoredSessionEvent[],
    options: { readonly inheritedEventCount: SessionLogOffset },
    keys?: readonly ProjectionKey[],
  ): ProjectionSnapshot {
    return foldDetached(
      events,
      options.inheritedEventCount,
      this.#entries(keys).map((entry) => entry.unit),
      this.#metrics,
    )
  }

  onChanged(listener: (change: ProjectionChange) => void): () => void {
    this.#changeListeners.add(listener)
    return () => void this.#changeListeners.delete(listener)
  }

  onSessionCold(listener: (session: Session, rows: ProjectionCheckpointRows) => unknown): () => void {
    this.#coldListeners.add(listener)
    return () => void this.#coldListeners.delete(listener)
  }

  /** Stops following the context's events (the plugin's disposer). */
  close(): void {
    for (const off of this.#unsubscribe.splice(0)) off()
  }

  #entries(keys: readonly string[] | undefined): Entry[] {
    if (keys === undefined) return [...this.#units.values()]
    return keys.map((key) => {
      const entry = this.#units.get(key)
      if (!entry) {
        throw new SessionProjectionError(
          'SESSION_PROJECTION_UNKNOWN_KEY',
          `No projection unit is registered under '${key}' (registered: ${this.#units.size === 0 ? 'none' : [...this.#units.keys()].join(', ')}). Register the unit before asking for it.`,
          { details: { key } },
        )
      }
      return entry
    })
  }

  /** The cell of `entry` for `session`, built if missing and folded through `upTo`. */
  #cell(entry: Entry, session: Session, upTo: number): Cell {
    let cell = entry.cells.get(session)
    if (!cell) {
      cell = this.#newCell(entry, session)
      entry.cells.set(session, cell)
      if (upTo >= 0) this.#metrics.lazyFolds++
    }
    if (cell.observedSeq < upTo) this.#catchUp(entry, session, cell, upTo)
    return cell
  }

  #newCell(entry: Entry, session: Session): Cell {
    const cell: Cell = { state: null, observedSeq: -1, failed: false, viewOf: NO_VIEW, view: undefined, viewWarned: false }
    try {
      // The cut is the session's for life (a fork's prefix never changes), so
      // a cell born now and one revived from a checkpoint agree.
      cell.state = entry.unit.init(Object.freeze({ inheritedEventCount: session.inheritedEventCount }))
    } catch (error) {
      this.#fail(entry, session, cell, -1, error)
    }
    return cell
  }

  /** Folds the events after the watermark from the in-memory log (a lazy build or a session whose events bypass the store). */
  #catchUp(entry: Entry, session: Session, cell: Cell, upTo: number): void {
    if (cell.failed) {
      cell.observedSeq = upTo
      return
    }
    for (let seq = cell.observedSeq + 1; seq <= upTo && !cell.failed; seq++) {
      const event = session.eventAt(seq)
      this.#metrics.logReads++
      if (event === undefined) break
      this.#apply(entry, session, cell, event)
    }
    cell.observedSeq = Math.max(cell.observedSeq, upTo)
  }

  #apply(entry: Entry, session: Session, cell: Cell, event: StoredSessionEvent): void {
    if (!cell.failed) {
      this.#metrics.applies++
      try {
        cell.state = entry.unit.apply(cell.state, event)
      } catch (error) {
        this.#fail(entry, session, cell, event.seq, error, event.type)
      }
    }
    cell.observedSeq = event.seq
  }

  #fail(entry: Entry, session: Session, cell: Cell, seq: number, error: unknown, type?: string): void {
    cell.failed = true
    cell.state = null
    cell.viewOf = NO_VIEW
    cell.view = undefined
    this.#metrics.failures++
    const where = seq < 0 ? 'in init()' : `on event ${seq} ('${type ?? '?'}')`
    this.#log().warn(
      `dsh: projection unit '${entry.unit.key}' threw ${where} for session '${session.id}'; its value is absent for that session from now on (the other units keep folding).`,
      error,
    )
  }

  /** The view of the cell's current state, computed once per state; `ABSENT` when the unit failed or `view` threw. */
  #view(entry: Entry, session: Session, cell: Cell): unknown {
    if (cell.failed) return ABSENT
    if (cell.viewOf !== cell.state || cell.viewOf === NO_VIEW) {
      this.#metrics.views++
      cell.viewOf = cell.state
      try {
        cell.view = entry.unit.view(cell.state)
      } catch (error) {
        // The state itself is still exact, so only this state's view is absent.
        cell.view = ABSENT
        if (!cell.viewWarned) {
          cell.viewWarned = true
          this.#log().warn(
            `dsh: projection unit '${entry.unit.key}' threw in view() for session '${session.id}'; the value is absent until a later state views cleanly.`,
            error,
          )
        }
      }
    }
    return cell.view
  }

  #observe(session: Session, event: StoredSessionEvent): void {
    // Every cell advances before any listener hears of a change, so a
    // listener that snapshots the session sees this event everywhere (and
    // its snapshot cannot fold the event into a cell this loop has yet to reach).
    const changes: ProjectionChange[] = []
    for (const entry of this.#units.values()) {
      const cell = this.#cell(entry, session, event.seq - 1)
      // Already folded: a snapshot inside an earlier listener of this same event caught the cell up.
      if (cell.observedSeq >= event.seq) continue
      if (this.#changeListeners.size === 0 || cell.failed) {
        this.#apply(entry, session, cell, event)
        continue
      }
      const before = this.#view(entry, session, cell)
      const state = cell.state
      this.#apply(entry, session, cell, event)
      if (cell.state === state && !cell.failed) continue
      const after = this.#view(entry, session, cell)
      if (!Object.is(before, after))
        changes.push({
          session,
          key: entry.unit.key as ProjectionKey,
          seq: event.seq as SessionSeqCursor,
          view: after === ABSENT ? undefined : after,
        })
    }
    for (const change of changes) this.#push(change)
  }

  #push(change: ProjectionChange): void {
    for (const listener of [...this.#changeListeners]) {
      try {
        listener(change)
      } catch (error) {
        this.#log().error(`dsh: a projection onChanged listener failed for '${change.key}'; the other listeners still ran.`, error)
      }
    }
  }

  /** `session/disposed`: hands the final rows to cold listeners and drops the session's cells. */
  #retire(session: Session): Promise<unknown> | undefined {
    const rows: Record<string, ProjectionCheckpointRow> = {}
    for (const entry of this.#units.values()) {
      const cell = entry.cells.get(session)
      if (!cell) continue
      if (cell.observedSeq < session.seq - 1) this.#catchUp(entry, session, cell, session.seq - 1)
      rows[entry.unit.key] = rowOf(entry, cell)
      entry.cells.delete(session)
    }
    if (this.#coldListeners.size === 0) return undefined
    const frozen = Object.freeze(rows)
    const pending = [...this.#coldListeners].map(async (listener) => listener(session, frozen))
    return Promise.allSettled(pending).then((settled) => {
      for (const result of settled) {
        if (result.status === 'rejected')
          this.#log().error(`dsh: a projection onSessionCold listener failed for session '${session.id}'.`, result.reason)
      }
    })
  }

  #log(): Logger {
    return this.#logger ?? this.#ctx?.get('logger') ?? consoleLogger
  }
}

function rowOf(entry: Entry, cell: Cell): ProjectionCheckpointRow {
  const seq = cell.observedSeq as SessionSeqCursor
  if (cell.failed) return Object.freeze({ stateVersion: entry.unit.stateVersion, seq, state: null, failed: true })
  return Object.freeze({ stateVersion: entry.unit.stateVersion, seq, state: cell.state })
}

/** Creates the registry and makes it follow `ctx`'s session events. */
export function createProjectionRegistry(ctx: Context, options: ProjectionRegistryOptions = {}): ProjectionRegistry {
  return new ProjectionRegistry(ctx, options)
}
