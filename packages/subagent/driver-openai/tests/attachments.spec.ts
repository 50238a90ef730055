import { Context } from '@dsh/context'
import { ATTACHMENT_INLINE_MAX_BYTES, sessionStorePlugin } from '@dsh/session'
import { renderAnthropic, sessionContextPlugin } from '@dsh/session-context'
import { appendUserMessage, attachmentResolver, createMemoryPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { describe, expect, it, onTestFinished } from 'vitest'
import { type ModelApi, runAgent } from '../src/index.js'
import { answer, type RecordedRequest, type ResponsesRequestBody, startModelServer } from '../src/testing/model-server.js'
import { testClient } from './helpers.js'

/** Bytes over the inline threshold, so the log holds a reference and the bytes live beside the session. */
function imageBytes(): Buffer {
  const out = Buffer.alloc(ATTACHMENT_INLINE_MAX_BYTES * 3)
  Buffer.from('89504e470d0a1a0a', 'hex').copy(out)
  for (let i = 8; i < out.length; i++) out[i] = (i * 131 + (i >> 7)) & 0xff
  return out
}

async function runWithImage(api: ModelApi, withSource: boolean) {
  const server = await startModelServer([answer(['A chart.']), answer(['Still a chart.'])])
  onTestFinished(() => server.close())
  const ctx = new Context()
  onTestFinished(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  const persistence = createMemoryPersistence()
  await ctx.activate(sessionPersistencePlugin(persistence))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  const session = ctx.require('sessions').create()
  const bytes = imageBytes()
  await appendUserMessage(ctx.require('sessionPersistence'), session, 'What is this?', [{ bytes, mediaType: 'image/png', name: 'c.png' }])
  const { client } = testClient(server.baseURL, { api })
  const options = {
    client,
    session,
    tools: [],
    signal: new AbortController().signal,
    context: ctx.require('sessionContext'),
    ...(withSource ? { attachments: (s: typeof session) => attachmentResolver(ctx.require('sessionPersistence'), s.header.id) } : {}),
  }
  expect((await runAgent(options)).reason).toBe('completed')
  expect((await runAgent({ ...options, prompt: 'And now?' })).reason).toBe('completed')
  return { server, ctx, session, base64: bytes.toString('base64') }
}

const chatParts = (request: RecordedRequest) =>
  request.body.messages.flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? (m.content as unknown[]) : []))

describe('images through the driver', () => {
  it('Chat: the request carries the image as an image_url data URL, read through the attachments source', async () => {
    const { server, base64 } = await runWithImage('chat', true)
    for (const request of server.requests) {
      expect(chatParts(request)).toEqual([
        { type: 'text', text: 'What is this?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } },
      ])
    }
  })

  it('Responses: the first request carries it as input_image; the chained one sends only the new prompt', async () => {
    const { server, base64 } = await runWithImage('responses', true)
    const [first, second] = server.requests.map((request) => request.body as unknown as ResponsesRequestBody)
    expect(first!.input).toEqual([
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is this?' },
          { type: 'input_image', image_url: `data:image/png;base64,${base64}`, detail: 'auto' },
        ],
      },
    ])
    expect(second!.input).toEqual([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'And now?' }] }])
  })

  it('Anthropic renders the same context block as a base64 source; without a source the driver sends a missing-attachment note', async () => {
    const { server, ctx, session, base64 } = await runWithImage('chat', false)
    expect(JSON.stringify(chatParts(server.requests[0]!))).toContain('[attachment c.png (image/png, 12288 bytes) is not available]')
    const context = await ctx.require('sessionContext').contextOf(session)
    const attachments = attachmentResolver(ctx.require('sessionPersistence'), session.header.id)
    await attachments.load(context.messages)
    const rendered = renderAnthropic(context, { model: 'claude-test', attachments: attachments.resolve })
    expect(rendered.body.messages[0]).toMatchObject({
      role: 'user',
      content: [
        { type: 'text', text: 'What is this?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: base64 } },
      ],
    })
  })
})
