import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { applyContextEvent, contextView, sessionContextUnit } from '@dsh/session-context'
import { afterEach, expect, it } from 'vitest'
import { createAnthropicSummarizer, runAgent } from '../src/index.js'
import { bodyOf, newStore, TEST_KEY, testClient } from './helpers.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

it('summarizes a context in one request without tools or thinking; the instruction joins the last user message', async () => {
  server = await startModelServer([answer(['Hi there.'], undefined, ['Greeting.']), answer(['They said hello.'])])
  const { client } = testClient(server, { thinkingBudget: 1024, maxTokens: 2048 })
  const session = newStore().create()
  await runAgent({ client, session, prompt: 'Hello', tools: [], signal: new AbortController().signal })
  session.append('user/message', { text: 'And now?' })
  const context = contextView(session.events.reduce(applyContextEvent, sessionContextUnit.init()))

  const summary = await createAnthropicSummarizer({ client }).summarize({ sessionId: session.id, context, instruction: 'Summarize.' })

  expect(summary).toMatchObject({ summary: 'They said hello.', provider: '127.0.0.1', model: 'claude-test' })
  expect(summary.usage).toMatchObject({ input: expect.any(Number), output: expect.any(Number) })
  const body = bodyOf(server.requests[1])
  expect(body.thinking).toBeUndefined()
  expect(body.tools).toBeUndefined()
  expect(body.messages.at(-1)).toEqual({
    role: 'user',
    content: [
      { type: 'text', text: 'And now?', cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'Summarize.' },
    ],
  })
})

it("renders the shadowed messages' stored images from the request's attachments resolver as base64 sources", async () => {
  server = await startModelServer([answer(['A chart was shown.'])])
  const { client } = testClient(server)
  const bytes = Buffer.alloc(10_008, 0x5a)
  const attachment = { digest: 'a'.repeat(64), mediaType: 'image/png', size: bytes.length, name: 'big.png' }
  const session = newStore().create()
  session.append('user/message', {
    text: 'look',
    blocks: [
      { type: 'text', text: 'look' },
      { type: 'image', attachment },
    ],
  })
  const context = contextView(session.events.reduce(applyContextEvent, sessionContextUnit.init()))
  const attachments = (ref: { digest: string }) => (ref.digest === attachment.digest ? { base64: bytes.toString('base64') } : undefined)

  await createAnthropicSummarizer({ client }).summarize({ sessionId: session.id, context, instruction: 'Summarize.', attachments })

  expect(bodyOf(server.requests[0]).messages).toEqual([
    {
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        {
          type: 'image',
          source: { type: 'base64', media_type: 'image/png', data: bytes.toString('base64') },
          cache_control: { type: 'ephemeral' },
        },
        { type: 'text', text: 'Summarize.' },
      ],
    },
  ])
})

it('blanks the API key out of the summary it returns (a server that echoes it back)', async () => {
  server = await startModelServer([answer([`The key was ${TEST_KEY}.`])])
  const { client } = testClient(server)
  const context = contextView([].reduce(applyContextEvent, sessionContextUnit.init()))
  const summary = await createAnthropicSummarizer({ client }).summarize({ sessionId: 's', context, instruction: 'Summarize.' })
  expect(summary.summary).toBe('The key was [redacted].')
})
