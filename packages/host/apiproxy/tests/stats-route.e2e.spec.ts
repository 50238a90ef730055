import { sessionStatsReport } from '@dsh/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack } from './support/stack.js'

// GET /api/sessions/:id/stats over the real stack (the stats units registered, as the host does).

let stack: Stack
beforeAll(async () => {
  stack = await startStack()
  const { sessions } = stack
  const parent = sessions.create({ id: 'stats-parent' })
  const usage = (input: number) => ({ input, output: 10, cacheRead: 5, reasoning: 2 })
  parent.append('user/message', { text: 'Plan   the work' })
  parent.append('turn/start', { turn: 1 })
  parent.append('assistant/message', { turn: 1, text: 'ok', usage: usage(100), provider: 'p', model: 'm' })
  parent.append('turn/end', { turn: 1, reason: 'completed' })
  const child = sessions.fork(parent, { childId: 'stats-child', origin: 'subagent', delegationDepth: 1 })
  child.append('turn/start', { turn: 2 })
  child.append('assistant/message', { turn: 2, text: 'done', usage: usage(40), provider: 'p', model: 'm' })
  child.append('turn/end', { turn: 2, reason: 'completed' })
})
afterAll(async () => {
  await stack.close()
})

describe('GET /api/sessions/:id/stats', () => {
  it('answers the session alone, or its tree summed with each fork counting only its own suffix, as the protocol declares', async () => {
    const alone = await stack.get('/api/sessions/stats-parent/stats')
    expect(alone.status).toBe(200)
    const session = sessionStatsReport.parse(alone.body)
    expect(session).toMatchObject({
      id: 'stats-parent',
      scope: 'session',
      title: 'Plan the work',
      cost: null,
      costReason: 'no-price-table',
    })
    expect(session.rollup.totals.tokens).toEqual({ input: 100, output: 10, cacheRead: 5, cacheWrite: 0, reasoning: 2 })

    const tree = sessionStatsReport.parse((await stack.get('/api/sessions/stats-parent/stats?scope=descendants')).body)
    expect(tree.sessions.map((s) => [s.id, s.depth, s.status, s.tokens])).toEqual([
      ['stats-parent', 0, 'ok', 117],
      ['stats-child', 1, 'ok', 57],
    ])
    expect(tree.rollup).toMatchObject({ sessions: 2, complete: true, gaps: [] })
    expect(tree.rollup.totals.tokens).toEqual({ input: 140, output: 20, cacheRead: 10, cacheWrite: 0, reasoning: 4 })
    expect(tree.rollup.totals.turns).toBe(2)
  })

  it('is 404 for an unknown session and 400 for an unknown scope', async () => {
    expect(await stack.get('/api/sessions/nobody/stats')).toMatchObject({ status: 404, body: { code: 'SUBAGENT_NOT_FOUND' } })
    expect(await stack.get('/api/sessions/stats-parent/stats?scope=everything')).toMatchObject({
      status: 400,
      body: { code: 'API_BAD_REQUEST' },
    })
  })

  it('needs the token', async () => {
    expect((await stack.get('/api/sessions/stats-parent/stats', { token: null })).status).toBe(401)
  })
})
