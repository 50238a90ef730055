import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import type { CheckpointThrottle } from '@dsh/session-projection-cache'
import { cacheTestHost } from '@dsh/session-projection-cache/testing'
import type pg from 'pg'
import { type PostgresProjectionCache, postgresProjectionCachePlugin } from '../src/index.js'

export { appendTurn as turn, testKeys as keys } from '@dsh/session-projection-cache/testing'

export interface HostOptions {
  readonly pool: pg.Pool
  /** Default: no throttled writes (only the mandatory ones). */
  readonly throttle?: CheckpointThrottle
  /** Persist through the PostgreSQL backend on the same pool (the whole stack). */
  readonly persist?: boolean
  readonly idPrefix?: string
  /** The mirror's bound (default the cache's). */
  readonly mirrorSessions?: number
  /** A cache that only reads rows. */
  readonly readOnly?: boolean
}

/** The shared cache test host (`@dsh/session-projection-cache/testing`) with the PostgreSQL cache on `pool`. */
export async function host(options: HostOptions) {
  const { pool, persist, mirrorSessions, readOnly, ...rest } = options
  const h = await cacheTestHost({
    ...rest,
    ...(persist
      ? {
          before: async (ctx) =>
            void (await ctx.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool }), { writeBehindMs: 0 }))),
        }
      : {}),
    activate: (ctx, throttle) =>
      ctx.activate(
        postgresProjectionCachePlugin({
          pool,
          throttle: throttle ?? { events: Infinity, ms: Infinity },
          ...(mirrorSessions === undefined ? {} : { mirrorSessions }),
          ...(readOnly === true ? { readOnly } : {}),
        }),
      ),
  })
  return { ...h, cache: h.cache as PostgresProjectionCache }
}
