import { compactionPlugin } from '@dsh/compaction'
import { Context, isDshError } from '@dsh/context'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { describe, expect, it, onTestFinished } from 'vitest'
import { budgetCompaction } from '../src/budget.js'
import { createOpenAISummarizer, runAgent } from '../src/index.js'
import { answer, type Reply, startModelServer } from '../src/testing/model-server.js'
import { testClient } from './helpers.js'

async function setup(replies: readonly Reply[]) {
  const server = await startModelServer(replies)
  onTestFinished(() => server.close())
  const ctx = new Context()
  onTestFinished(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  ctx.provide('summarizer', createOpenAISummarizer({ client: testClient(server.baseURL).client }))
  await ctx.activate(compactionPlugin())
  const session = ctx.require('sessions').create()
  converse(session)
  return { ctx, server, session, estimate: await ctx.require('compaction').estimate(session) }
}

function converse(session: Session): void {
  for (let turn = 1; turn <= 4; turn++) {
    session.append('turn/start', { turn })
    session.append('user/message', { text: `Question ${turn}?` })
    session.append('assistant/message', { turn, text: 'An answer. '.repeat(40) })
    session.append('turn/end', { turn, reason: 'completed' })
  }
}

const compactions = (session: Session) => session.events.filter((e) => e.type.startsWith('compaction/')).map((e) => e.type)

describe('budgetCompaction', () => {
  it('compacts only once the estimate reaches the budget', async () => {
    const { ctx, session, estimate } = await setup([answer(['Four questions answered.'])])
    const check = budgetCompaction({ compaction: () => ctx.get('compaction'), window: estimate * 2 })
    expect(await check(session)).toMatchObject({ estimate, compaction: undefined })
    expect(compactions(session)).toEqual([])
    const over = budgetCompaction({ compaction: ctx.require('compaction'), window: estimate, keep: 2 })
    const result = await over(session)
    expect(result?.compaction?.tokensAfter).toBeLessThan(estimate)
    expect(compactions(session)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
  })

  it('never throws: a failed compaction is returned and the log records it; without the service it does nothing', async () => {
    const { ctx, session, estimate } = await setup([
      { kind: 'error', status: 503, message: 'overloaded' },
      { kind: 'error', status: 503, message: 'overloaded' },
      { kind: 'error', status: 503, message: 'overloaded' },
    ])
    const result = await budgetCompaction({ compaction: ctx.require('compaction'), window: estimate })(session)
    expect(isDshError(result?.error, 'COMPACTION_SUMMARIZER_FAILED')).toBe(true)
    expect(compactions(session)).toEqual(['compaction/start', 'compaction/end'])
    expect(await budgetCompaction({ compaction: () => undefined, window: 1 })(session)).toBeUndefined()
  })

  it('a run whose summary would not shrink the context does not compact: the turn completes, the log records no-gain', async () => {
    // The summary repeats every answer: longer than the range it would replace.
    const { ctx, server, session, estimate } = await setup([answer(['Summary: ', 'An answer. '.repeat(200)]), answer(['Done.'])])
    const before = await ctx.require('sessionContext').contextOf(session)
    const outcome = await runAgent({
      client: testClient(server.baseURL).client,
      session,
      prompt: 'Go on.',
      tools: [],
      signal: new AbortController().signal,
      context: ctx.require('sessionContext'),
      compaction: () => ctx.get('compaction'),
      contextWindow: estimate,
    })
    expect(outcome).toMatchObject({ reason: 'completed', text: 'Done.' })
    expect(compactions(session)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    expect(session.events.find((e) => e.type === 'compaction/end')!.data).toMatchObject({ error: 'no-gain' })
    const after = await ctx.require('sessionContext').contextOf(session)
    expect(after.messages.slice(0, before.messages.length)).toEqual(before.messages)
    expect(after.messages.some((m) => m.summary !== undefined)).toBe(false)
  })
})
