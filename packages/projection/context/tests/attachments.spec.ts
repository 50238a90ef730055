import { execFileSync } from 'node:child_process'
import { Context } from '@dsh/context'
import { ATTACHMENT_INLINE_MAX_BYTES, sessionStorePlugin } from '@dsh/session'
import { appendUserMessage, attachmentResolver } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { applyContextEvent, contextView, renderAnthropic, renderChat, sessionContextUnit } from '../src/index.js'

/** Image-like bytes over the inline threshold (a PNG signature, then varied bytes). */
function imageBytes(size: number): Buffer {
  const out = Buffer.alloc(size)
  Buffer.from('89504e470d0a1a0a', 'hex').copy(out)
  for (let i = 8; i < size; i++) out[i] = (i * 131 + (i >> 7)) & 0xff
  return out
}

describe('attachments from bytes to a request body', () => {
  it('a user message with an image: the JSONL log holds the reference only (zstd -dc shows no image bytes); Chat gets a data URL and Anthropic a base64 source, read through the persistence', async () => {
    const root = tempDir('dsh-ctx-att-')
    onTestFinished(root.cleanup)
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    const backend = createJsonlPersistence({ root: root.dir })
    await ctx.activate(sessionPersistencePlugin(backend))
    const persistence = ctx.require('sessionPersistence')
    const session = ctx.require('sessions').create({ id: 'with-image', cwd: '/work' })
    const bytes = imageBytes(ATTACHMENT_INLINE_MAX_BYTES * 5)
    const base64 = bytes.toString('base64')
    await appendUserMessage(persistence, session, 'What is in this picture?', [{ bytes, mediaType: 'image/png', name: 'shot.png' }])
    await ctx.require('sessions').flush(session)

    const plain = execFileSync('zstd', ['-dc', backend.logPath('with-image')], { maxBuffer: 64 << 20 }).toString('latin1')
    expect(plain).toContain('What is in this picture?')
    expect(plain).not.toContain(base64.slice(0, 64))
    expect(plain).not.toContain(bytes.subarray(8, 72).toString('latin1'))
    expect(plain.length).toBeLessThan(bytes.length)

    // The context is folded from the stored log, as a driver's would be.
    let state = sessionContextUnit.init()
    for (const event of (await persistence.inspect(session.header.id)).events) state = applyContextEvent(state, event)
    const context = contextView(state)
    const attachments = attachmentResolver(persistence, session.header.id)
    expect(await attachments.load(context.messages)).toBe(1)

    const chat = renderChat(context, { model: 'gpt-test', attachments: attachments.resolve })
    expect(chat.warnings['missing-attachment']).toBe(0)
    expect(chat.body.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } },
      ],
    })
    const anthropic = renderAnthropic(context, { model: 'claude-test', attachments: attachments.resolve })
    expect(anthropic.warnings['missing-attachment']).toBe(0)
    expect(anthropic.body.messages.at(-1)).toMatchObject({
      role: 'user',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: base64 } },
      ],
    })
    // Without the persistence's bytes the renderers count the image missing instead.
    expect(renderChat(context, { model: 'gpt-test' }).warnings['missing-attachment']).toBe(1)
    await ctx.dispose()
  })
})
