import { compactionPlugin } from '@dsh/compaction'
import { Context, isDshError } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { describe, expect, it, onTestFinished } from 'vitest'
import { type AgentTool, createOpenAISummarizer, runAgent } from '../src/index.js'
import { answer, callTools, type RecordedRequest, serverTokenCount, startModelServer } from '../src/testing/model-server.js'
import { testClient } from './helpers.js'

const WINDOW = 2_000
const STEPS = 30
const SUMMARIZE = /^Summarize the conversation above/
const lastUser = (request: RecordedRequest) => String(request.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '')

/** A tool whose result is about 120 of the server's tokens (words and full stops). */
const readTool: AgentTool = {
  name: 'read',
  description: 'Reads a chunk.',
  jsonSchema: { type: 'object', properties: {} },
  async execute() {
    return { text: 'plain words about rivers and hills. '.repeat(20) }
  },
}

async function setup(withCompaction: boolean) {
  let summaries = 0
  const server = await startModelServer(
    (request) => {
      if (SUMMARIZE.test(lastUser(request))) return answer([`Summary ${++summaries} of the reading.`])
      const calls = request.body.messages.filter((m) => m.role === 'tool').at(-1)?.tool_call_id
      const step = calls === undefined ? 0 : Number(calls.slice(1)) + 1
      return step >= STEPS ? answer(['Done.']) : callTools([{ id: `c${step}`, name: 'read', arguments: '{}' }])
    },
    { contextWindow: WINDOW },
  )
  onTestFinished(() => server.close())
  const ctx = new Context()
  onTestFinished(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  const { client } = testClient(server.baseURL)
  if (withCompaction) {
    ctx.provide('summarizer', createOpenAISummarizer({ client }))
    await ctx.activate(compactionPlugin())
  }
  return { server, ctx, client, session: ctx.require('sessions').create() }
}

/** The 30-step reading turn with the compaction service, and `window` options. */
async function readAll(window: { contextWindow?: number }) {
  const { server, ctx, client, session } = await setup(true)
  const outcome = await runAgent({
    client,
    session,
    prompt: 'Read every chunk.',
    tools: [readTool],
    signal: new AbortController().signal,
    maxSteps: STEPS + 1,
    context: ctx.require('sessionContext'),
    compaction: () => ctx.get('compaction'),
    ...window,
  })
  return { server, session, outcome }
}

describe('the step loop compacts at the budget', () => {
  it('with the compaction service and contextWindow, a turn of 30 tool steps stays inside a 2,000-token window', async () => {
    const { server, session, outcome } = await readAll({ contextWindow: WINDOW })
    expect(outcome).toMatchObject({ reason: 'completed', text: 'Done.' })
    const ends = session.events.filter((e) => e.type === 'compaction/end')
    expect(ends.length).toBeGreaterThanOrEqual(2)
    expect(ends.every((e) => (e.data as { error?: unknown }).error === undefined)).toBe(true)
    expect(Math.max(...server.requests.map((r) => serverTokenCount(r.body)))).toBeLessThanOrEqual(WINDOW)
    // Each compaction happens between a step's results and the next step/start.
    for (const start of session.events.filter((e) => e.type === 'compaction/start')) {
      expect(session.events[start.seq - 1]?.type).toMatch(/^(tool\/result|compaction\/end)$/)
    }
  })

  it('without a contextWindow nothing compacts, and the model refuses the overgrown request', async () => {
    const { session, outcome } = await readAll({})
    expect(outcome.reason).toBe('error')
    expect(isDshError(outcome.error, 'DRIVER_OPENAI_BAD_REQUEST')).toBe(true)
    expect(session.events.some((e) => e.type.startsWith('compaction/'))).toBe(false)
  })

  it('a window or fraction that is not a number of tokens is DRIVER_OPENAI_INVALID_OPTIONS', async () => {
    const { client, session } = await setup(false)
    for (const bad of [
      { contextWindow: 0 },
      { contextWindow: 1.5 },
      { contextWindow: 100, compactAt: 0 },
      { contextWindow: 100, compactAt: 2 },
    ]) {
      await expect(
        runAgent({ client, session, prompt: 'x', tools: [], signal: new AbortController().signal, ...bad }),
      ).rejects.toMatchObject({ code: 'DRIVER_OPENAI_INVALID_OPTIONS' })
    }
  })
})
