import { definePlugin } from '@dsh/context'
import type { SessionProjections } from '@dsh/session-projection'
import { createSessionContextService, type SessionContextService } from './service.js'
import { sessionContextUnit } from './unit.js'

declare module '@dsh/context' {
  interface Services {
    sessionContext: SessionContextService
  }
}

/** Registers the `sessionContext` unit on `projections`; returns its disposer. */
export function registerSessionContextUnit(projections: SessionProjections): () => void {
  return projections.register(sessionContextUnit)
}

/**
 * Registers the `sessionContext` unit and provides service `sessionContext`.
 * `sessions`, `sessionPersistence` and `sessionProjectionCache` are optional
 * and looked up per call: without persistence only live sessions answer,
 * without the cache a cold session is folded from its first event.
 */
export const sessionContextPlugin = (options: { readonly memo?: number } = {}) =>
  definePlugin({
    name: 'sessionContext',
    inject: { required: ['sessionProjections'], optional: ['sessions', 'sessionPersistence', 'sessionProjectionCache'] },
    activate(ctx) {
      const projections = ctx.require('sessionProjections')
      ctx.onDispose(registerSessionContextUnit(projections))
      const service = createSessionContextService({
        projections,
        sessions: () => ctx.get('sessions'),
        persistence: () => ctx.get('sessionPersistence'),
        cache: () => ctx.get('sessionProjectionCache'),
        ...(options.memo === undefined ? {} : { memo: options.memo }),
      })
      ctx.onDispose(ctx.provide('sessionContext', service))
    },
  })
