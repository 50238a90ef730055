import { SessionId } from '@dsh/session'
import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { SessionPersistenceCoordinator } from '../src/index.js'
import { sleep, testHost } from './support.js'

describe('coordinator under random faults', () => {
  it.each(Array.from({ length: 12 }, (_, i) => i + 1))('seed %i: the stored log equals the session log exactly', async (seed) => {
    const random = prng(seed)
    const host = testHost()
    const coordinator = new SessionPersistenceCoordinator(host.ctx, host.backend, {
      writeBehindMs: Math.floor(random() * 3),
      maxBatchEvents: 1 + Math.floor(random() * 8),
      retryDelayMs: 0,
      maxRetryDelayMs: 2,
    })
    coordinator.start()
    const sessions = [host.sessions.create({ id: 'a' }), host.sessions.create({ id: 'b' })]
    const flushes: Promise<unknown>[] = []
    for (let step = 0; step < 120; step++) {
      const roll = random()
      const session = sessions[Math.floor(random() * sessions.length)]!
      if (roll < 0.55) session.append('user/message', { text: `${session.id}${step}`, n: step })
      else if (roll < 0.65) host.backend.failAppends(1 + Math.floor(random() * 2))
      else if (roll < 0.72) host.backend.loseAcks(1)
      else if (roll < 0.8) flushes.push(host.sessions.flush(session).catch((error: unknown) => error))
      else await sleep(Math.floor(random() * 3))
    }
    await Promise.all(flushes)
    // Faults still queued hit the final flushes; keep flushing until both are durable.
    for (let attempt = 0; attempt < 20; attempt++) {
      const results = await Promise.allSettled(sessions.map((s) => host.sessions.flush(s)))
      if (results.every((r) => r.status === 'fulfilled')) break
    }
    for (const session of sessions) {
      const stored = await host.backend.inner.inspect(SessionId(session.id))
      expect(stored.events.map((e) => [e.seq, e.type, JSON.stringify(e.data), e.time])).toEqual(
        session.events.map((e) => [e.seq, e.type, JSON.stringify(e.data), e.time]),
      )
      expect(coordinator.status(session.id)).toMatchObject({ pending: 0, stalled: false })
    }
    await coordinator.close()
    await host.ctx.dispose()
  })
})
