import { sessionListPage } from '@dsh/protocol'
import type { Session } from '@dsh/session'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack } from './support/stack.js'

// GET /api/sessions lists titles, tokens and cost as far as the server knows
// them without a log read: a live session's own views, a cold one's checkpoint.

let stack: Stack

function usedTokens(session: Session, text: string): void {
  session.append('user/message', { text })
  session.append('turn/start', { turn: 1 })
  session.append('assistant/message', { turn: 1, text: 'ok', usage: { input: 100, output: 20 }, provider: 'p', model: 'm' })
  session.append('turn/end', { turn: 1, reason: 'completed' })
}

beforeAll(async () => {
  stack = await startStack({ backend: 'disk' })
  const { sessions } = stack
  usedTokens(sessions.create({ id: 'a-live' }), 'Plan   the release')
  const cold = sessions.create({ id: 'b-cold' })
  usedTokens(cold, 'Review <b>the</b> plan')
  cold.append('turn/start', { turn: 2 })
  cold.append('assistant/message', { turn: 2, text: 'more', usage: { input: 1, output: 2 }, provider: 'p', model: 'm' })
  cold.append('turn/end', { turn: 2, reason: 'completed' })
  await sessions.flush(cold)
  // Going cold writes its final checkpoint.
  await sessions.dispose('b-cold')
  await stack.ctx.require('sessionProjectionCache').idle()
})
afterAll(async () => {
  await stack.close()
})

describe('GET /api/sessions', () => {
  it('lists each session with its title and tokens from its live views or its checkpoint, cost null (no price table), no log read', async () => {
    const metrics = stack.disk!.persistence.metrics
    const cache = stack.ctx.require('sessionProjectionCache').metrics
    const [bodyReads, hits] = [metrics.bodyReads, cache.hits]
    const { status, body } = await stack.get('/api/sessions')
    expect(status).toBe(200)
    const page = sessionListPage.parse(body)
    expect(page.sessions.map((s) => [s.header.id, s.live, s.title, s.tokens, s.cost])).toEqual([
      ['a-live', true, 'Plan the release', 120, null],
      ['b-cold', false, 'Review <b>the</b> plan', 123, null],
    ])
    // The exact body the protocol declares: parsing changes nothing.
    expect(JSON.stringify(page)).toBe(JSON.stringify(body))
    // The cold session's values are one cache hit; no log body was read for any of it.
    expect(cache.hits - hits).toBe(1)
    expect(metrics.bodyReads).toBe(bodyReads)
  })
})
