import type { Session, SessionHeader, SessionLogOffset } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot } from '@dsh/session-projection'

/**
 * Optional acceleration (service `sessionProjectionCache`): one checkpoint per
 * session, identified by the header witness fields plus the exact cut.
 * Derived data: deleting or corrupting it changes only cost, never results.
 */
export interface SessionProjectionCache {
  /**
   * The cached views for this exact lifecycle and cut, or `undefined` (no row,
   * another identity, another stateVersion). No log I/O. May throw on a
   * poisoned row: every consumer treats a throw as a miss.
   */
  cachedSnapshot(header: SessionHeader, inheritedEventCount: SessionLogOffset, keys: readonly ProjectionKey[]): ProjectionSnapshot | undefined
  /** Writes the live session's checkpoint now (after flushing its log). Fail-soft: resolves false on failure. */
  writeCheckpoint(session: Session): Promise<boolean>
  /** Counters for tests and benchmarks. */
  readonly metrics: Readonly<{ hits: number; misses: number; writes: number; failedWrites: number }>
  close(): void
}

declare module '@dsh/context' {
  interface Services {
    sessionProjectionCache: SessionProjectionCache
  }
}
