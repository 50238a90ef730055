import type { ApiLimits, ApiServer } from '@dsh/apiproxy'
import { definePlugin } from '@dsh/context'

declare module '@dsh/context' {
  interface Services {
    /** The HTTP API and web catalog page (present when the host was created with `http`). */
    httpApi: ApiServer
  }
}

export interface HttpApiOptions {
  /** The bearer token every data route requires (at least 16 characters). Never log it. */
  readonly token: string
  /** Interface to bind; default `127.0.0.1` (loopback only). */
  readonly host?: string
  /** Port to bind; default 0 (any free port; read it from `host.http.url`). */
  readonly port?: number
  readonly limits?: Partial<ApiLimits>
}

/**
 * The HTTP API as a plugin like the others: it declares the services it
 * serves, so a host without them fails at activation with
 * `CONTEXT_SERVICE_UNAVAILABLE`, not on the first request. `@dsh/apiproxy`
 * (the HTTP server and the page) is loaded only when this plugin activates.
 * Its disposer runs first (activated last), so serving stops before the
 * services it reads close.
 */
export const httpApiPlugin = (options: HttpApiOptions) =>
  definePlugin({
    name: 'httpApi',
    inject: { required: ['sessions', 'sessionQuery', 'subagents', 'sessionProjections'], optional: ['logger'] },
    async activate(ctx) {
      const { createApiServer } = await import('@dsh/apiproxy')
      const server = await createApiServer({
        ctx,
        token: options.token,
        ...(options.host === undefined ? {} : { host: options.host }),
        ...(options.port === undefined ? {} : { port: options.port }),
        ...(options.limits === undefined ? {} : { limits: options.limits }),
      })
      const withdraw = ctx.provide('httpApi', server)
      ctx.onDispose(async () => {
        withdraw()
        await server.close()
      })
    },
  })
