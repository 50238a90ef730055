import { join } from 'node:path'
import { consoleLogger, definePlugin } from '@dsh/context'
import { provideCheckpointCache } from './activate.js'
import { SqliteProjectionCache } from './cache.js'
import { SessionProjectionCacheError } from './errors.js'
import type { CheckpointThrottle } from './scheduler.js'

/**
 * Where a session root keeps its checkpoint cache: `<root>/.dsh/projections.sqlite`,
 * in the one dsh-owned directory (0700) that holds every derived file of a
 * root. A file at `<root>/.cache/projections.sqlite` is not this cache: it is
 * neither read nor removed. A missing cache fills on use.
 */
export function projectionCachePath(root: string): string {
  return join(root, '.dsh', 'projections.sqlite')
}

export interface ProjectionCachePluginOptions {
  /** The database file. Give this or `root`. */
  readonly path?: string
  /** A session root: the file is `projectionCachePath(root)`. */
  readonly root?: string
  /** Background write cadence between the mandatory writes. */
  readonly throttle?: CheckpointThrottle
  /** Run `quick_check` over the file on open (for `dsh verify`; default false). */
  readonly check?: boolean
  /** A host that only reads: the file is opened read-only if it exists, and nothing is ever written, created or removed. */
  readonly readOnly?: boolean
}

/**
 * Provides service `sessionProjectionCache` and schedules its writes. On
 * dispose it writes the final checkpoints of live sessions, then closes the
 * database (activate it after persistence, so its disposer runs first).
 * Activated after persistence, it also follows persistence's change feed to
 * delete the rows of deleted sessions (`CheckpointScheduler`).
 */
export const sessionProjectionCachePlugin = (options: ProjectionCachePluginOptions) =>
  definePlugin({
    name: 'sessionProjectionCache',
    inject: { required: ['sessions', 'sessionProjections'], optional: ['sessionPersistence'] },
    activate(ctx) {
      const path = options.path ?? (options.root === undefined ? undefined : projectionCachePath(options.root))
      if (path === undefined) {
        throw new SessionProjectionCacheError(
          'SESSION_PROJECTION_CACHE_INVALID_OPTIONS',
          'sessionProjectionCachePlugin needs a `path` or a session `root`.',
        )
      }
      const cache = new SqliteProjectionCache({
        path,
        projections: ctx.sessionProjections,
        sessions: ctx.sessions,
        logger: () => ctx.get('logger') ?? consoleLogger,
        ...(options.check === undefined ? {} : { check: options.check }),
        ...(options.readOnly === undefined ? {} : { readOnly: options.readOnly }),
      })
      provideCheckpointCache(ctx, cache, { throttle: options.throttle })
    },
  })
