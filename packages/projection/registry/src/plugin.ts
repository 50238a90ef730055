import { definePlugin } from '@dsh/context'
import { ProjectionRegistry, type ProjectionRegistryOptions } from './registry.js'

/** Provides service `sessionProjections`, following the `sessions` store's events. */
export const sessionProjectionsPlugin = (options: ProjectionRegistryOptions = {}) =>
  definePlugin({
    name: 'sessionProjections',
    inject: { required: ['sessions'] },
    activate(ctx) {
      const registry = new ProjectionRegistry(ctx, options)
      const withdraw = ctx.provide('sessionProjections', registry)
      ctx.onDispose(() => {
        registry.close()
        withdraw()
      })
    },
  })
