// A process that appends to live sessions persisted by the real jsonl backend
// while the projection cache checkpoints them, reporting on stdout how many
// checkpoint writes it made and how many of its sessions have a checkpoint.
// The parent SIGKILLs it at an arbitrary moment.
// Usage: node checkpointing-appender.mjs <root> <cachePath> <idPrefix>
import { Context } from '@dsh/context'
import { SessionLogOffset, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { countUnit } from './units.mjs'

const [root, cachePath, prefix] = process.argv.slice(2)
const ctx = new Context()
await ctx.activate(sessionStorePlugin())
// A long write-behind window: in-memory events are often not durable yet when
// a checkpoint is due, which is exactly when a cache could lead the log.
await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root }), { writeBehindMs: 40 }))
await ctx.activate(sessionProjectionsPlugin())
ctx.require('sessionProjections').register(countUnit)
await ctx.activate(sessionProjectionCachePlugin({ path: cachePath, throttle: { events: 7, ms: 3 } }))
const sessions = ctx.require('sessions')
const cache = ctx.require('sessionProjectionCache')

const live = [0, 1, 2].map((i) => sessions.create({ id: `${prefix}-${i}` }))
let reported = 0
let turn = 0
for (;;) {
  turn++
  for (const session of live) {
    session.append('turn/start', { turn })
    for (let k = 0; k < 1 + (turn % 4); k++) session.append('assistant/chunk', { turn, index: k, delta: `${session.id}:${turn}:${k}` })
    // Every other turn stays open for a while, so some checkpoints come from the throttles.
    if (turn % 2 === 0) session.append('turn/end', { turn, reason: 'completed' })
    else if (turn > 1) session.append('turn/end', { turn: turn - 1, reason: 'completed' })
  }
  if (cache.metrics.writes > reported) {
    reported = cache.metrics.writes
    const covered = live.filter((s) => cache.cachedSnapshot(s.header, SessionLogOffset(0), ['eventCounts']) !== undefined).length
    process.stdout.write(`WROTE ${reported} COVERED ${covered}\n`)
  }
  // Let flushes, fsyncs and checkpoint writes make progress between bursts.
  await new Promise((resolve) => setTimeout(resolve, turn % 3))
}
