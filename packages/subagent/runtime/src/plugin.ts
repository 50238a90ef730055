import { definePlugin } from '@dsh/context'
import { registerSubagentUnits } from './projection.js'
import { SubagentRuntime, type SubagentRuntimeOptions } from './runtime.js'

declare module '@dsh/context' {
  interface Services {
    subagents: SubagentRuntime
  }
}

/**
 * Provides service `subagents` and registers the `subagent`,
 * `subagentTiming` and `subagentProfile` units.
 *
 * It requires `sessions` and `sessionProjections` (a missing one fails at
 * activation with `CONTEXT_SERVICE_UNAVAILABLE`), and an invalid option
 * (`maxDepth`, `coldReadConcurrency`) fails activation with
 * `SUBAGENT_INVALID_OPTIONS`. `sessionQuery`, `sessionPersistence` and
 * `sessionProjectionCache` are optional and looked up per operation: without
 * a query backend, spawn, resume and send work and a listing rejects with
 * `SUBAGENT_CONTROL_QUERY_UNAVAILABLE`; without persistence a cold resume
 * fails with `SUBAGENT_PERSISTENCE_UNAVAILABLE`; without the cache cold
 * children take one body read each. A session disposed while its children run
 * drains them. With `readOnly` (a read-only host) the runtime lists and
 * starts no run (`SUBAGENT_READ_ONLY`), and loads no `outputSchema` checks.
 */
export const subagentsPlugin = (options: SubagentRuntimeOptions) =>
  definePlugin({
    name: 'subagents',
    inject: { required: ['sessions', 'sessionProjections'], optional: ['sessionQuery', 'sessionPersistence', 'sessionProjectionCache'] },
    async activate(ctx) {
      const runtime = new SubagentRuntime(ctx, options)
      await runtime.ready()
      ctx.onDispose(registerSubagentUnits(ctx.sessionProjections))
      ctx.provide('subagents', runtime)
      ctx.onDispose(ctx.on('session/disposed', (session) => void runtime.drain(session.id)))
      // Registered last so it runs first on disposal: runs settle (and children
      // flush) while persistence is still open.
      ctx.onDispose(() => runtime.dispose())
    },
  })
