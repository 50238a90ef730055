import { isIP } from 'node:net'
import type { ApiLimits, ApiServer } from '@dsh/apiproxy'
import { type Context, definePlugin } from '@dsh/context'
import type { PriceTable } from '@dsh/session-stats'

declare module '@dsh/context' {
  interface Services {
    /** The listening HTTP server of `createHost({ http })` (the request listener itself is `httpApi`). */
    httpServer: ApiServer
  }
}

export interface HttpApiOptions {
  /** The bearer token every data route requires (at least 16 characters). Never log it. */
  readonly token: string
  /** Interface to bind; default `127.0.0.1` (loopback only). A host name given here is also accepted in `Host` headers. */
  readonly host?: string
  /** Port to bind; default 0 (any free port; read it from `host.http.url`). */
  readonly port?: number
  readonly limits?: Partial<ApiLimits>
  /** More names the API accepts in `Host` headers (besides loopback and `host`). */
  readonly allowedHosts?: readonly string[]
}

/**
 * The HTTP API, activated like every other plugin: `@dsh/apiproxy`'s
 * `apiproxyPlugin` (which declares the services it serves, so a host without
 * them fails at activation with `CONTEXT_SERVICE_UNAVAILABLE`) provides the
 * request listener `httpApi`; `httpServerPlugin` serves it on `node:http` and
 * provides `httpServer`. `@dsh/apiproxy` is loaded only here, when a host
 * serves HTTP. Activated last, so serving stops first on disposal. The
 * host's price table (`prices`) prices the listing's and stats route's cost.
 */
export async function activateHttpApi(ctx: Context, options: HttpApiOptions, prices?: PriceTable): Promise<void> {
  const { apiproxyPlugin } = await import('@dsh/apiproxy')
  const named = options.host !== undefined && isIP(options.host) === 0 ? [options.host] : []
  const allowedHosts = [...(options.allowedHosts ?? []), ...named]
  await ctx.activate(
    apiproxyPlugin({
      token: options.token,
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(allowedHosts.length === 0 ? {} : { allowedHosts }),
      ...(prices === undefined ? {} : { prices }),
    }),
  )
  await ctx.activate(httpServerPlugin(options))
}

/** Serves the `httpApi` request listener on `node:http` (127.0.0.1 by default) and provides `httpServer`; disposal closes it. */
export const httpServerPlugin = (options: Pick<HttpApiOptions, 'host' | 'port'>) =>
  definePlugin({
    name: 'httpServer',
    inject: { required: ['httpApi'] },
    async activate(ctx) {
      const { listenApi } = await import('@dsh/apiproxy')
      const server = await listenApi(ctx.httpApi, {
        ...(options.host === undefined ? {} : { host: options.host }),
        ...(options.port === undefined ? {} : { port: options.port }),
      })
      const withdraw = ctx.provide('httpServer', server)
      ctx.onDispose(async () => {
        withdraw()
        await server.close()
      })
    },
  })
