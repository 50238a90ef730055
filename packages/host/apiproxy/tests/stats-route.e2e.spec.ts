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

  it("carries an unreadable child's problem code with a fixed message, never its path or byte offset, and logs the original", async () => {
    // The child's read fails as a damaged log's does: the message names the file and the byte.
    const damage = {
      code: 'SESSION_PERSISTENCE_CORRUPT',
      message: 'Session log /srv/dsh/stats-child/log.jsonl.zst is corrupt at byte 815: the stored batch fails its CRC32',
    }
    const damaged = await startStack({
      wrap: (services) => ({
        ...services,
        subagents: Object.assign(Object.create(services.subagents) as typeof services.subagents, {
          treeSnapshots: async (...args: Parameters<NonNullable<typeof services.subagents.treeSnapshots>>) => {
            const entries = await services.subagents.treeSnapshots!(...args)
            return entries.map((entry) => {
              if (entry.id !== 'lost-child') return entry
              const { snapshot: _snapshot, ...rest } = entry
              return { ...rest, status: 'corrupt' as const, problem: damage }
            })
          },
        }),
      }),
    })
    try {
      const parent = damaged.sessions.create({ id: 'lost-parent' })
      parent.append('user/message', { text: 'hello' })
      damaged.sessions.fork(parent, { childId: 'lost-child', origin: 'subagent', delegationDepth: 1 })
      const { status, body } = await damaged.get('/api/sessions/lost-parent/stats?scope=descendants')
      expect(status).toBe(200)
      const report = sessionStatsReport.parse(body)
      expect(report.rollup.gaps.map((gap) => [gap.id, gap.problem?.code])).toEqual([['lost-child', 'SESSION_PERSISTENCE_CORRUPT']])
      expect(report.sessions.find((session) => session.id === 'lost-child')?.problem?.code).toBe('SESSION_PERSISTENCE_CORRUPT')
      expect(JSON.stringify(body)).not.toMatch(/\/srv\/dsh|log\.jsonl|byte \d/)
      expect(JSON.stringify(damaged.logs.find((log) => log.message.includes('unreadable session'))?.error)).toContain('byte 815')
    } finally {
      await damaged.close()
    }
  })

  it('needs the token', async () => {
    expect((await stack.get('/api/sessions/stats-parent/stats', { token: null })).status).toBe(401)
  })
})
