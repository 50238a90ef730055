import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot } from '@dsh/session-projection'

export interface ProjectionCacheMetrics {
  hits: number
  misses: number
  /** Checkpoints stored (live writes and cold writes). */
  writes: number
  /** Writes that failed softly (flush failure, SQLite error, closed cache). */
  failedWrites: number
  /** Times the database file was found unusable and recreated empty. */
  rebuilds: number
  /** Sessions whose rows were deleted because persistence does not hold them (deleted) (see `forgetDeleted`). */
  forgotten: number
}

/**
 * Optional acceleration (service `sessionProjectionCache`): one checkpoint per
 * session, identified by the header witness fields plus the exact cut.
 * Derived data: deleting or corrupting it changes only cost, never results.
 */
export interface SessionProjectionCache {
  /**
   * The cached views for this exact lifecycle and cut, or `undefined` (no row,
   * another identity, another stateVersion, an unregistered key). Every
   * requested key must hit, or the whole lookup misses. Synchronous; no log
   * I/O. May throw on a poisoned row: every consumer treats a throw as a miss.
   */
  cachedSnapshot(
    header: SessionHeader,
    inheritedEventCount: SessionLogOffset,
    keys: readonly ProjectionKey[],
  ): ProjectionSnapshot | undefined
  /** Writes the live session's checkpoint now (after flushing its log). Fail-soft: resolves false on failure. */
  writeCheckpoint(session: Session): Promise<boolean>
  /** Resolves when no checkpoint write is in flight (tests, shutdown). */
  idle(): Promise<void>
  /** Counters for tests and benchmarks. */
  readonly metrics: Readonly<ProjectionCacheMetrics>
  /**
   * A full integrity check of the backing store (for `dsh verify`; never run
   * on an ordinary open): `'ok'`, or the problem found, after which the store
   * was rebuilt empty. Optional: backends without such a check omit it.
   */
  checkDatabase?(): string
  close(): void
}

declare module '@dsh/context' {
  interface Services {
    sessionProjectionCache: SessionProjectionCache
  }
}
