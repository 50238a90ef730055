import type { Session, SessionLogOffset, SessionSeqCursor, StoredSessionEvent } from '@dsh/session'

/** Host-side state per unit key (what folds and what checkpoints store). Augment it. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface SessionProjectionStateMap {}
/** Client-visible view per unit key (what snapshots return). Augment it. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface SessionProjectionMap {}

export type ProjectionKey = keyof SessionProjectionStateMap & keyof SessionProjectionMap & string

/**
 * What a unit is told when a state is born (`init`): where the session's own
 * events begin. Events with `seq < inheritedEventCount` were inherited from
 * the session a fork was cut from; a unit that reports only what a session
 * did itself (usage, timing) skips them.
 */
export interface ProjectionInitContext {
  /** The fork cut: `0` for a session that inherited nothing. */
  readonly inheritedEventCount: SessionLogOffset
}

/**
 * A projection unit: a pure, synchronous fold of the log. `apply` returns the
 * same state reference when an event changes nothing. `schema` validates
 * state read back from a checkpoint (a row that fails it is poisoned).
 * States must be plain JSON (they are checkpointed with `JSON.stringify`) and
 * must never be mutated in place: `apply` returns a new state instead.
 */
export interface SessionProjectionUnit<K extends ProjectionKey = ProjectionKey> {
  readonly key: K
  readonly stateVersion: number
  /**
   * The state before any event. The registry always passes the session's cut
   * (live cells, detached folds); a unit may ignore it. A direct call without
   * it (a unit test) means a cut of 0.
   */
  init(context?: ProjectionInitContext): SessionProjectionStateMap[K]
  apply(state: SessionProjectionStateMap[K], event: StoredSessionEvent): SessionProjectionStateMap[K]
  view(state: SessionProjectionStateMap[K]): SessionProjectionMap[K]
  readonly schema: ProjectionStateSchema<SessionProjectionStateMap[K]>
}

/**
 * A unit's checkpoint schema: a zod schema, classic (`zod`) or `zod/mini`
 * (both parse with `safeParse`), so a unit whose states are read by a short
 * command can keep classic zod out of that command.
 */
export interface ProjectionStateSchema<T> {
  safeParse(input: unknown): { readonly success: true; readonly data: T } | { readonly success: false; readonly error: unknown }
}

/** Views by key; a key is absent when its unit failed for that session or was not asked for. */
export type ProjectionSnapshot = { readonly [K in ProjectionKey]?: SessionProjectionMap[K] }

/** One unit's checkpointed state. */
export interface ProjectionCheckpointRow {
  readonly stateVersion: number
  /** The last seq folded into `state` (-1: nothing folded yet). */
  readonly seq: SessionSeqCursor
  readonly state: unknown
  /**
   * True when the unit threw while folding event `seq`: the value is absent
   * for this session from then on, and `state` is `null`. Checkpointing the
   * failure lets a cold read reproduce the live absence exactly.
   */
  readonly failed?: true
}

export type ProjectionCheckpointRows = { readonly [key: string]: ProjectionCheckpointRow }

export interface ProjectionChange {
  readonly session: Session
  readonly key: ProjectionKey
  /** The seq of the event that changed the view. */
  readonly seq: SessionSeqCursor
  /** The new view; `undefined` when the key became absent (its unit failed). */
  readonly view: unknown
}

/**
 * Counters for tests and benchmarks: they let a test assert "no old event was
 * folded again" instead of timing anything.
 */
export interface ProjectionMetrics {
  /** `apply` calls made for live cells (lazy builds included, detached folds excluded). */
  applies: number
  /** Cells built from events that were already in the log when the cell was first needed. */
  lazyFolds: number
  /** Events read back from a session's in-memory log to build or catch up cells. */
  logReads: number
  /** `view` calls made for live cells. */
  views: number
  /** Live cells that failed (their unit threw in `init` or `apply`). */
  failures: number
  /** `apply` calls made by detached `fold`. */
  detachedApplies: number
}

/** The unit registry with its live watermark cache (service `sessionProjections`). */
export interface SessionProjections {
  /**
   * Registers a unit; returns its disposer. Reference-counted per key: the
   * same key with the same `stateVersion` shares the first unit and its cells;
   * another `stateVersion` throws `SESSION_PROJECTION_VERSION_CONFLICT`.
   * When the last registration of a key is disposed its cells are dropped.
   */
  register<K extends ProjectionKey>(unit: SessionProjectionUnit<K>): () => void
  /** Registered keys. */
  keys(): ProjectionKey[]
  /** The registered `stateVersion` of `key`, or `undefined` when it is not registered. */
  stateVersionOf(key: string): number | undefined
  /**
   * Synchronous: the live watermark views of `session`. Reads no persisted
   * log; a cell that does not exist yet is built once from the session's
   * in-memory log. Unknown keys throw `SESSION_PROJECTION_UNKNOWN_KEY`.
   */
  snapshot(session: Session, keys?: readonly ProjectionKey[]): ProjectionSnapshot
  /**
   * The live cells as checkpoint rows (for the cache). A failed cell yields a
   * `failed` row. Rows hold no cut: each state was born from the session's
   * cut, a unit whose value depends on it keeps it in its state, and a cache
   * keys its rows by the cut.
   */
  checkpoint(session: Session, keys?: readonly ProjectionKey[]): ProjectionCheckpointRows
  /**
   * Turns checkpoint rows back into views. Rows with another `stateVersion`
   * and missing rows leave their key absent; a poisoned row (malformed, or a
   * state that fails the unit's schema) throws `SESSION_PROJECTION_INVALID_CHECKPOINT`.
   */
  viewCheckpoint(rows: ProjectionCheckpointRows, keys?: readonly ProjectionKey[]): ProjectionSnapshot
  /** A detached fold of a cold observation; keeps no state. Each unit's `init` is told `inheritedEventCount`. */
  fold(
    events: readonly StoredSessionEvent[],
    options: { readonly inheritedEventCount: SessionLogOffset },
    keys?: readonly ProjectionKey[],
  ): ProjectionSnapshot
  /** Push: called when a live session's view of a key changes (a new view reference). */
  onChanged(listener: (change: ProjectionChange) => void): () => void
  /**
   * Called when a live session goes cold (`session/disposed`, after the store
   * flushed it) with the final rows of the cells it had, just before they are
   * dropped. `store.dispose` awaits the listeners (the checkpoint cache writes here).
   */
  onSessionCold(listener: (session: Session, rows: ProjectionCheckpointRows) => unknown): () => void
  readonly metrics: Readonly<ProjectionMetrics>
}

declare module '@dsh/context' {
  interface Services {
    sessionProjections: SessionProjections
  }
}
