import { definePlugin } from '@dsh/context'
import { type ApiHandler, type ApiHandlerOptions, createApiHandler } from './server.js'
import type { ApiServices } from './services.js'

declare module '@dsh/context' {
  interface Services {
    /** The HTTP API's request listener (`apiproxyPlugin`); serve it with `listenApi` or mount it in a server of your own. */
    httpApi: ApiHandler
  }
}

export type ApiPluginOptions = Pick<ApiHandlerOptions, 'token' | 'limits' | 'allowedHosts'> & Pick<ApiServices, 'prices'>

/**
 * The HTTP API as a plugin: requires `sessionQuery` and `subagents` (a
 * missing one fails at activation with `CONTEXT_SERVICE_UNAVAILABLE`), reads
 * `sessions` and `sessionProjections` for the event stream and the listing's
 * live values, `sessionProjectionCache` for its cached values and `sessionPersistence` for attachment bytes, when present, and
 * provides service `httpApi`. Disposing the context ends its event streams.
 */
export const apiproxyPlugin = (options: ApiPluginOptions) =>
  definePlugin({
    name: 'apiproxy',
    inject: {
      required: ['sessionQuery', 'subagents'],
      optional: ['sessions', 'sessionProjections', 'sessionProjectionCache', 'sessionPersistence', 'compaction', 'logger'],
    },
    activate(ctx) {
      const { prices, ...handlerOptions } = options
      const handler = createApiHandler({
        ...handlerOptions,
        services: {
          sessionQuery: ctx.sessionQuery,
          subagents: ctx.subagents,
          sessions: ctx.sessions,
          sessionProjections: ctx.sessionProjections,
          sessionProjectionCache: ctx.sessionProjectionCache,
          sessionPersistence: ctx.sessionPersistence,
          compaction: ctx.compaction,
          sessionLoader: ctx.sessionPersistence,
          prices,
        },
        events: ctx,
        ...(ctx.logger === undefined ? {} : { logger: ctx.logger }),
      })
      ctx.provide('httpApi', handler)
      ctx.onDispose(() => handler.close())
    },
  })
