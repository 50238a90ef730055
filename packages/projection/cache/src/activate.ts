import type { PluginContext } from '@dsh/context'
import { CheckpointScheduler, type CheckpointThrottle, type CheckpointWriter, type InvalidOptions } from './scheduler.js'
import type { SessionProjectionCache } from './types.js'

/**
 * The activation every checkpoint cache plugin shares, once its cache is
 * open: schedule the cache's writes, provide it as `sessionProjectionCache`,
 * and on dispose write the final checkpoints of live sessions, wait for every
 * write, withdraw the service, then close. A refused throttle closes the
 * cache before it throws, so a failed activation leaves nothing open.
 *
 * When `sessionPersistence` is active already (a plugin lists it as an
 * optional service and is activated after persistence), its change feed
 * drives the scheduler's forgetting passes: the rows of deleted sessions
 * are deleted on the writer's own path, never by a lookup.
 */
export function provideCheckpointCache(
  ctx: PluginContext<'sessions' | 'sessionProjections'>,
  cache: SessionProjectionCache & CheckpointWriter,
  options: { readonly throttle?: CheckpointThrottle | undefined; readonly invalid?: InvalidOptions | undefined },
): void {
  let scheduler: CheckpointScheduler
  try {
    scheduler = new CheckpointScheduler({
      ctx,
      cache,
      projections: ctx.sessionProjections,
      sessions: ctx.sessions,
      feed: ctx.get('sessionPersistence'),
      throttle: options.throttle,
      invalid: options.invalid,
    })
  } catch (error) {
    cache.close()
    throw error
  }
  const withdraw = ctx.provide('sessionProjectionCache', cache)
  ctx.onDispose(async () => {
    await scheduler.close()
    await cache.idle()
    withdraw()
    cache.close()
  })
  scheduler.start()
}
