import { definePlugin } from '@dsh/context'
import type { SessionRepairs } from '@dsh/session-persistence'
import { persistedAttachments } from './attachments.js'
import { interruptedCompactionEnds } from './repair.js'
import { createCompactionService } from './service.js'
import type { CompactionServiceOptions } from './types.js'

/**
 * Provides service `compaction` and registers its crash-repair rule on
 * `sessionRepairs` (when persistence provides it), so that a load closes a
 * compaction a crash left open. `summarizer` is looked up per call: without
 * one, `compact` is refused and `prune` still works. With `sessionPersistence`
 * (a backend that stores attachments), the summarizer gets the bytes of the
 * images and files the shadowed messages reference.
 */
export const compactionPlugin = (options: CompactionServiceOptions = {}) =>
  definePlugin({
    name: 'compaction',
    inject: { required: ['sessions', 'sessionContext'], optional: ['summarizer', 'sessionRepairs', 'sessionPersistence'] },
    activate(ctx) {
      const repairs: SessionRepairs | undefined = ctx.get('sessionRepairs')
      if (repairs !== undefined) ctx.onDispose(repairs.register(interruptedCompactionEnds))
      const sessions = ctx.require('sessions')
      const persistence = ctx.get('sessionPersistence')
      const attachments = persistence === undefined ? undefined : persistedAttachments(persistence)
      const service = createCompactionService(
        {
          context: () => ctx.require('sessionContext'),
          flush: (session) => sessions.flush(session),
          summarizer: () => ctx.get('summarizer'),
          ...(attachments === undefined ? {} : { attachments }),
        },
        options,
      )
      ctx.onDispose(ctx.provide('compaction', service))
    },
  })
