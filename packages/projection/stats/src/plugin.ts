import { definePlugin } from '@dsh/context'
import type { SessionProjections } from '@dsh/session-projection'
import { sessionStatsUnit } from './stats-unit.js'
import { sessionTitleUnit } from './title.js'

/** Registers `sessionStats` and `sessionTitle` on `projections`; returns one disposer for both. */
export function registerSessionStatsUnits(projections: SessionProjections): () => void {
  const releases = [projections.register(sessionStatsUnit), projections.register(sessionTitleUnit)]
  return () => {
    for (const release of releases.splice(0)) release()
  }
}

/** Registers the `sessionStats` and `sessionTitle` units on the `sessionProjections` service (no service of its own). */
export const sessionStatsPlugin = () =>
  definePlugin({
    name: 'sessionStats',
    inject: { required: ['sessionProjections'] },
    activate(ctx) {
      ctx.onDispose(registerSessionStatsUnits(ctx.require('sessionProjections')))
    },
  })
