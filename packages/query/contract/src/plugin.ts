import { definePlugin } from '@dsh/context'
import { createSessionQuery } from './memory-query.js'

/**
 * Provides service `sessionQuery` with the in-memory backend over the
 * `sessions` store and `sessionPersistence`.
 */
export const sessionQueryPlugin = () =>
  definePlugin({
    name: 'sessionQuery',
    inject: { required: ['sessions', 'sessionPersistence'] },
    activate(ctx) {
      ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.sessions, persistence: ctx.sessionPersistence }))
    },
  })
