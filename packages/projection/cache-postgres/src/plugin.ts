import { consoleLogger, definePlugin } from '@dsh/context'
import type { CheckpointThrottle } from '@dsh/session-projection-cache'
import { provideCheckpointCache } from '@dsh/session-projection-cache/backend'
import type pg from 'pg'
import { createPostgresProjectionCache, type PostgresProjectionCache } from './cache.js'
import { PostgresProjectionCacheError } from './errors.js'

export interface PostgresProjectionCachePluginOptions {
  /** The pool shared with the PostgreSQL persistence. */
  readonly pool: pg.Pool
  /** Background write cadence between the mandatory writes. */
  readonly throttle?: CheckpointThrottle
  readonly migrate?: boolean
  /** Read rows only, never write one (see `createPostgresProjectionCache`). */
  readonly readOnly?: boolean
  /** Sessions whose rows the mirror keeps (default 10,000; see `createPostgresProjectionCache`). */
  readonly mirrorSessions?: number
}

/**
 * Provides service `sessionProjectionCache` on PostgreSQL and schedules its
 * writes. On dispose it writes the final checkpoints of live sessions, then
 * closes (activate it after persistence, so its disposer runs first).
 * Activated after persistence, it also follows persistence's change feed to
 * delete the rows of deleted sessions (see the README).
 */
export const postgresProjectionCachePlugin = (options: PostgresProjectionCachePluginOptions) =>
  definePlugin({
    name: 'sessionProjectionCache (postgres)',
    inject: { required: ['sessions', 'sessionProjections'], optional: ['sessionPersistence'] },
    async activate(ctx) {
      const cache: PostgresProjectionCache = await createPostgresProjectionCache({
        pool: options.pool,
        projections: ctx.sessionProjections,
        sessions: ctx.sessions,
        logger: () => ctx.get('logger') ?? consoleLogger,
        ...(options.migrate === undefined ? {} : { migrate: options.migrate }),
        ...(options.readOnly === true ? { readOnly: true } : {}),
        ...(options.mirrorSessions === undefined ? {} : { mirrorSessions: options.mirrorSessions }),
      })
      provideCheckpointCache(ctx, cache, {
        throttle: options.throttle,
        invalid: (message) => new PostgresProjectionCacheError('POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS', message),
      })
    },
  })
