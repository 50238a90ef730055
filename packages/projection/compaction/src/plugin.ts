import { definePlugin } from '@dsh/context'
import type { SessionRepairs } from '@dsh/session-persistence'
import { interruptedCompactionEnds } from './repair.js'
import { createCompactionService } from './service.js'
import type { CompactionServiceOptions } from './types.js'

/**
 * Provides service `compaction` and registers its crash-repair rule on
 * `sessionRepairs` (when persistence provides it), so that a load closes a
 * compaction a crash left open. `summarizer` is looked up per call: without
 * one, `compact` is refused and `prune` still works.
 */
export const compactionPlugin = (options: CompactionServiceOptions = {}) =>
  definePlugin({
    name: 'compaction',
    inject: { required: ['sessions', 'sessionContext'], optional: ['summarizer', 'sessionRepairs'] },
    activate(ctx) {
      const repairs: SessionRepairs | undefined = ctx.get('sessionRepairs')
      if (repairs !== undefined) ctx.onDispose(repairs.register(interruptedCompactionEnds))
      const sessions = ctx.require('sessions')
      const service = createCompactionService(
        {
          context: () => ctx.require('sessionContext'),
          flush: (session) => sessions.flush(session),
          summarizer: () => ctx.get('summarizer'),
        },
        options,
      )
      ctx.onDispose(ctx.provide('compaction', service))
    },
  })
