import { compactionPlugin } from '@dsh/compaction'
import { Context, isDshError } from '@dsh/context'
import { ATTACHMENT_INLINE_MAX_BYTES, type Session, sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { appendUserMessage, createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createOpenAISummarizer } from '../src/index.js'
import { answer, type ModelServerOptions, type Reply, serverTokenCount, startModelServer } from '../src/testing/model-server.js'
import { TEST_KEY, testClient } from './helpers.js'

async function setup(replies: readonly Reply[], options: ModelServerOptions = {}) {
  const server = await startModelServer(replies, options)
  onTestFinished(() => server.close())
  const ctx = new Context()
  onTestFinished(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createMemoryPersistence()))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  ctx.provide('summarizer', createOpenAISummarizer({ client: testClient(server.baseURL).client }))
  await ctx.activate(compactionPlugin())
  return {
    server,
    ctx,
    sessions: ctx.require('sessions'),
    compaction: ctx.require('compaction'),
    persistence: ctx.require('sessionPersistence'),
  }
}

function converse(session: Session, turns: number): void {
  for (let turn = 1; turn <= turns; turn++) {
    session.append('turn/start', { turn })
    session.append('user/message', { text: `Question ${turn}: what is in file ${turn}?` })
    session.append('assistant/message', { turn, text: `File ${turn} holds ${'word '.repeat(50)}` })
    session.append('turn/end', { turn, reason: 'completed' })
  }
}

describe('createOpenAISummarizer', () => {
  it('sends the shadowed context then the instruction, without tools; the answer is the stored summary', async () => {
    const { server, ctx, sessions, compaction } = await setup([answer(['The user asked ', 'about files 1 and 2.'])])
    const session = sessions.create()
    converse(session, 3)
    await compaction.compact(session, { reason: 'manual', keep: 2, instruction: 'Summarize.' })
    const body = server.requests[0]!.body
    expect(body.messages.map((m) => [m.role, m.content?.slice(0, 11)])).toEqual([
      ['user', 'Question 1:'],
      ['assistant', 'File 1 hold'],
      ['user', 'Question 2:'],
      ['assistant', 'File 2 hold'],
      ['user', 'Summarize.'],
    ])
    expect(body.tools ?? []).toEqual([])
    const summary = session.events.find((e) => e.type === 'compaction/summary')!.data
    expect(summary).toMatchObject({
      summary: [{ type: 'text', text: 'The user asked about files 1 and 2.' }],
      provider: '127.0.0.1',
      model: 'test-model',
      usage: { input: expect.any(Number), output: expect.any(Number) },
    })
    const context = await ctx.require('sessionContext').contextOf(session)
    expect(context.messages.map((m) => m.role)).toEqual(['user', 'user', 'assistant'])
  })

  it('a request over the window is refused by the server as providers do; the compaction ends with that error and the context is unchanged', async () => {
    const { server, ctx, sessions, compaction } = await setup([answer(['never sent'])], { contextWindow: 60 })
    const session = sessions.create()
    converse(session, 3)
    const before = await ctx.require('sessionContext').contextOf(session)
    const error = await compaction.compact(session, { reason: 'manual', keep: 2 }).catch((e: unknown) => e)
    expect(isDshError(error, 'COMPACTION_SUMMARIZER_FAILED')).toBe(true)
    expect(isDshError((error as Error).cause, 'DRIVER_OPENAI_BAD_REQUEST')).toBe(true)
    expect((error as Error).message).toMatch(/maximum context length is 60 tokens/)
    expect(serverTokenCount(server.requests[0]!.body)).toBeGreaterThan(60)
    expect(session.events.at(-1)).toMatchObject({ type: 'compaction/end', data: { error: expect.stringMatching(/context length/) } })
    expect((await ctx.require('sessionContext').contextOf(session)).messages).toEqual(before.messages)
  })

  it('an image stored beside the session (over the inline threshold) reaches the summarize request as a data URL', async () => {
    const { server, sessions, compaction, persistence } = await setup([answer(['The user sent a chart.'])])
    const session = sessions.create()
    const bytes = Buffer.alloc(ATTACHMENT_INLINE_MAX_BYTES * 2 + 1_816, 0x5a)
    await appendUserMessage(persistence, session, 'look', [{ bytes, mediaType: 'image/png', name: 'big.png' }])
    await compaction.compact(session, { reason: 'manual', keep: 0, instruction: 'Summarize.' })
    const [shadowed, asked] = server.requests[0]!.body.messages
    expect(shadowed).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${bytes.toString('base64')}` } },
      ],
    })
    expect(asked).toEqual({ role: 'user', content: 'Summarize.' })
    expect(JSON.stringify(server.requests[0]!.body)).not.toContain('is not available')
  })

  it('blanks the API key out of the summary before it is stored (a server that echoes it back)', async () => {
    const { sessions, compaction } = await setup([answer([`The key was ${TEST_KEY}.`])])
    const session = sessions.create()
    converse(session, 3)
    await compaction.compact(session, { reason: 'manual', keep: 2 })
    const summary = session.events.find((e) => e.type === 'compaction/summary')!.data
    expect(summary).toMatchObject({ summary: [{ type: 'text', text: 'The key was [redacted].' }] })
    expect(JSON.stringify(session.events)).not.toContain(TEST_KEY)
  })
})
