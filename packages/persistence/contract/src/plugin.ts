import { definePlugin, type Plugin } from '@dsh/context'
import type { PersistenceCoordinatorOptions, SessionPersistenceCoordinator } from './coordinator.js'
import { type SharedReadsOptions, withSharedReads } from './shared-reads.js'
import type { SessionPersistence } from './types.js'

export interface SessionPersistencePluginOptions extends PersistenceCoordinatorOptions {
  /**
   * Shared in-flight reads and the observation LRU in front of the backend
   * (default on, `lruSize` 8). `false` provides the backend as it is.
   */
  readonly sharedReads?: SharedReadsOptions | false
  /** Receives the coordinator once it is started (to flush all or read its status). */
  readonly onCoordinator?: (coordinator: SessionPersistenceCoordinator) => void
}

/**
 * Provides service `sessionPersistence` (and `sessionRepairs`, the
 * backend's crash-repair rules) and persists every live session of
 * service `sessions`. On context disposal it flushes everything still pending,
 * then closes the backend (also when the flush failed, after reporting it).
 * The coordinator's module is loaded at activation, not when this plugin is
 * imported.
 */
export function sessionPersistencePlugin(
  persistence: SessionPersistence,
  options: SessionPersistencePluginOptions = {},
): Plugin<'sessions'> {
  return definePlugin({
    name: 'sessionPersistence',
    inject: { required: ['sessions'] },
    async activate(ctx) {
      const { SessionPersistenceCoordinator } = await import('./coordinator.js')
      const service = options.sharedReads === false ? persistence : withSharedReads(persistence, options.sharedReads)
      const coordinator = new SessionPersistenceCoordinator(ctx, service, options)
      ctx.provide('sessionPersistence', service)
      if (service.repairs !== undefined) ctx.provide('sessionRepairs', service.repairs)
      ctx.onDispose(async () => {
        try {
          await coordinator.close()
        } finally {
          await service.close()
        }
      })
      coordinator.start()
      options.onCoordinator?.(coordinator)
    },
  })
}
