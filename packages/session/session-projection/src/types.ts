import type { Session, SessionLogOffset, SessionSeqCursor, StoredSessionEvent } from '@dsh/session'
import type { z } from 'zod'

/** Host-side state per unit key (what folds and what checkpoints store). Augment it. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface SessionProjectionStateMap {}
/** Client-visible view per unit key (what snapshots return). Augment it. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface SessionProjectionMap {}

export type ProjectionKey = keyof SessionProjectionStateMap & keyof SessionProjectionMap & string

/**
 * A projection unit: a pure, synchronous fold of the log. `apply` returns the
 * same state reference when an event changes nothing. `schema` validates
 * state read back from a checkpoint (a row that fails it is poisoned).
 */
export interface SessionProjectionUnit<K extends ProjectionKey = ProjectionKey> {
  readonly key: K
  readonly stateVersion: number
  init(): SessionProjectionStateMap[K]
  apply(state: SessionProjectionStateMap[K], event: StoredSessionEvent): SessionProjectionStateMap[K]
  view(state: SessionProjectionStateMap[K]): SessionProjectionMap[K]
  readonly schema: z.ZodType<SessionProjectionStateMap[K]>
}

/** Views by key; a key is absent when its unit failed for that session or was not asked for. */
export type ProjectionSnapshot = { readonly [K in ProjectionKey]?: SessionProjectionMap[K] }

/** One unit's checkpointed state. */
export interface ProjectionCheckpointRow {
  readonly stateVersion: number
  /** The last seq folded into `state` (-1: nothing folded yet). */
  readonly seq: SessionSeqCursor
  readonly state: unknown
}

export type ProjectionCheckpointRows = { readonly [key: string]: ProjectionCheckpointRow }

export interface ProjectionChange {
  readonly session: Session
  readonly key: ProjectionKey
  /** The seq of the event that changed the view. */
  readonly seq: SessionSeqCursor
  readonly view: unknown
}

/** The unit registry with its live watermark cache (service `sessionProjections`). */
export interface SessionProjections {
  /** Registers a unit; returns its disposer (reference-counted per key + stateVersion). */
  register<K extends ProjectionKey>(unit: SessionProjectionUnit<K>): () => void
  /** Registered keys. */
  keys(): ProjectionKey[]
  /** Synchronous: the live watermark views of `session`. Reads no log. */
  snapshot(session: Session, keys?: readonly ProjectionKey[]): ProjectionSnapshot
  /** The live cells as checkpoint rows (for the cache). */
  checkpoint(session: Session, keys?: readonly ProjectionKey[]): ProjectionCheckpointRows
  /** Turns checkpoint rows back into views; throws on a poisoned row. Rows with another stateVersion are ignored. */
  viewCheckpoint(rows: ProjectionCheckpointRows, keys?: readonly ProjectionKey[]): ProjectionSnapshot
  /** A detached fold of a cold observation. */
  fold(events: readonly StoredSessionEvent[], options: { readonly inheritedEventCount: SessionLogOffset }, keys?: readonly ProjectionKey[]): ProjectionSnapshot
  /** Push: called when a live session's view of a key changes. */
  onChanged(listener: (change: ProjectionChange) => void): () => void
}

declare module '@dsh/context' {
  interface Services {
    sessionProjections: SessionProjections
  }
}
