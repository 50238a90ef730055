import type { CompactionServiceOptions, Summarizer } from '@dsh/compaction'
import type { Context } from '@dsh/context'

/**
 * Service `compaction` over `summarizer`: the context unit (when the host
 * has not activated it for a driver already), the summarizer, then the
 * compaction plugin, which registers its crash repair on the persistence
 * backend so every load closes a compaction a crash left open.
 */
export async function activateCompaction(ctx: Context, summarizer: Summarizer, options: CompactionServiceOptions = {}): Promise<void> {
  if (ctx.get('sessionContext') === undefined) {
    const { sessionContextPlugin } = await import('@dsh/session-context')
    await ctx.activate(sessionContextPlugin())
  }
  ctx.onDispose(ctx.provide('summarizer', summarizer))
  const { compactionPlugin } = await import('@dsh/compaction')
  await ctx.activate(compactionPlugin(options))
}
