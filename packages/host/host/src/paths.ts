import { projectionCachePath } from '@dsh/session-projection-cache'
import { defaultIndexPath } from '@dsh/session-query-sqlite'

/** Where a root keeps its derived files (owned by their packages; deleting either changes only cost, never a result). */
export interface DerivedPaths {
  /** The SQLite query index. */
  readonly index: string
  /** The SQLite projection checkpoint cache. */
  readonly projectionCache: string
}

export function derivedPaths(root: string): DerivedPaths {
  return { index: defaultIndexPath(root), projectionCache: projectionCachePath(root) }
}
