import { appendUserMessage, createMemoryPersistence } from '@dsh/session-persistence'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { SummarizeRequest, Summarizer } from '../src/index.js'
import { converse, host } from './support.js'

/** A summarizer that answers `text` and records each request. */
function answering(text: string): Summarizer & { requests: SummarizeRequest[] } {
  const requests: SummarizeRequest[] = []
  return {
    requests,
    async summarize(request) {
      requests.push(request)
      return { summary: text, provider: 'test', model: 'fixed' }
    },
  }
}

describe('attachments in the shadowed range', () => {
  it('the summarizer gets the stored bytes of an image over the inline threshold, read through the persistence', async () => {
    const summarizer = answering('The user sent a picture to look at.')
    const persistence = createMemoryPersistence()
    const h = await host(persistence, summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    const bytes = Buffer.alloc(10_008, 7)
    const event = await appendUserMessage(persistence, session, 'look', [{ bytes, mediaType: 'image/png', name: 'big.png' }])
    const ref = (event.data.blocks![1] as { attachment: { digest: string; data?: string } }).attachment
    expect(ref.data).toBeUndefined()
    await h.compaction.compact(session, { reason: 'manual', keep: 0 })
    const resolve = summarizer.requests[0]!.attachments!
    expect(resolve(ref as never)?.base64).toBe(bytes.toString('base64'))
  })

  it('without a backend that stores attachments, the request carries no resolver', async () => {
    const summarizer = answering('Short.')
    // A real backend whose attachment methods are hidden, as a backend without attachment storage has none.
    const noAttachments = new Proxy(createMemoryPersistence(), {
      get: (target, name) => {
        if (name === 'readAttachment' || name === 'putAttachment') return undefined
        const value: unknown = Reflect.get(target, name)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const h = await host(noAttachments, summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 2, 400)
    await h.compaction.compact(session, { reason: 'manual', keep: 0 })
    expect(summarizer.requests[0]!.attachments).toBeUndefined()
  })
})
