import { Context } from '@dsh/context'
import { ATTACHMENT_INLINE_MAX_BYTES, SessionId, sessionStorePlugin } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  appendUserMessage,
  attachmentBlock,
  attachmentResolver,
  createMemoryPersistence,
  MemoryPersistenceStorage,
  sessionPersistencePlugin,
  withSharedReads,
} from '../src/index.js'
import { FaultyPersistence } from './support.js'

function bytesOf(size: number, seed: number): Buffer {
  return Buffer.from(Array.from({ length: size }, (_, i) => (i * 31 + seed * 7) & 0xff))
}

describe('attachments on the memory backend and the helpers', () => {
  it('the cap is configurable; a bad cap is INVALID_OPTION when the backend is made', async () => {
    const storage = new MemoryPersistenceStorage()
    const p = createMemoryPersistence({ storage, attachmentMaxBytes: 10 })
    await p.putAttachment!(SessionId('s'), bytesOf(10, 1), { mediaType: 'image/png' })
    await expect(p.putAttachment!(SessionId('s'), bytesOf(11, 1), { mediaType: 'image/png' })).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE',
      details: { size: 11, maxBytes: 10 },
    })
    expect(storage.blobs.size).toBe(1)
    expect(() => createMemoryPersistence({ attachmentMaxBytes: 1.5 })).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_OPTION' }),
    )
  })

  it('appendUserMessage stores the bytes, then appends a message holding the reference only; the resolver reads them back', async () => {
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    const backend = createMemoryPersistence()
    await ctx.activate(sessionPersistencePlugin(backend))
    const persistence = ctx.require('sessionPersistence')
    const session = ctx.require('sessions').create({ id: 'att', cwd: '/work' })
    const large = bytesOf(ATTACHMENT_INLINE_MAX_BYTES + 1, 2)
    const small = bytesOf(16, 3)
    const event = await appendUserMessage(persistence, session, 'what is this?', [
      { bytes: large, mediaType: 'image/png', name: 'shot.png' },
      { bytes: small, mediaType: 'application/pdf' },
    ])
    const blocks = event.data.blocks!
    expect(blocks.map((b) => b.type)).toEqual(['text', 'image', 'file'])
    expect(blocks[1]).toMatchObject({ attachment: { mediaType: 'image/png', size: large.length, name: 'shot.png' } })
    expect(JSON.stringify(event.data)).not.toContain(large.toString('base64').slice(0, 40))
    expect(blocks[2]).toMatchObject({ attachment: { data: small.toString('base64') } })
    await ctx.require('sessions').flush(session)
    const stored = await persistence.inspect(session.header.id)
    expect(JSON.stringify(stored.events)).not.toContain(large.toString('base64').slice(0, 40))
    const attachments = attachmentResolver(persistence, session.header.id)
    const ref = (blocks[1] as { attachment: Parameters<typeof attachments.resolve>[0] }).attachment
    expect(attachments.resolve(ref)).toBeUndefined()
    // The inline one is not read; the other is read once however often it is referenced.
    expect(await attachments.load([{ blocks }, { blocks: [{ type: 'tool-result', content: [blocks[1]] }] }])).toBe(1)
    expect(await attachments.load([{ blocks }])).toBe(0)
    expect(attachments.resolve(ref)).toEqual({ base64: large.toString('base64') })
    await ctx.dispose()
  })

  it('appendUserMessage with an attachment over the cap is ATTACHMENT_TOO_LARGE and appends nothing', async () => {
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    const storage = new MemoryPersistenceStorage()
    await ctx.activate(sessionPersistencePlugin(createMemoryPersistence({ storage, attachmentMaxBytes: 4096 })))
    const persistence = ctx.require('sessionPersistence')
    const session = ctx.require('sessions').create({ id: 'att-cap', cwd: '/work' })
    await expect(
      appendUserMessage(persistence, session, 'too big', [{ bytes: bytesOf(4097, 6), mediaType: 'image/png' }]),
    ).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE' })
    expect(session.events).toEqual([])
    expect(storage.blobs.size).toBe(0)
    await ctx.dispose()
  })

  it('a digest the session cannot read is left out by load (a renderer counts it missing)', async () => {
    const p = createMemoryPersistence()
    const elsewhere = await attachmentBlock(p, SessionId('other'), {
      bytes: bytesOf(ATTACHMENT_INLINE_MAX_BYTES * 2, 4),
      mediaType: 'image/jpeg',
    })
    const attachments = attachmentResolver(p, SessionId('mine'))
    expect(await attachments.load([{ blocks: [elsewhere] }])).toBe(0)
    expect(attachments.resolve(elsewhere.attachment)).toBeUndefined()
  })

  it('shared reads pass attachments through; a backend without them is ATTACHMENTS_UNSUPPORTED for the helpers', async () => {
    const backend = createMemoryPersistence()
    const shared = withSharedReads(backend)
    const block = await attachmentBlock(shared, SessionId('w'), { bytes: bytesOf(5000, 5), mediaType: 'text/plain' })
    expect(block.type).toBe('file')
    expect(Buffer.from(await backend.readAttachment!(SessionId('w'), block.attachment.digest)).equals(bytesOf(5000, 5))).toBe(true)
    const without = new FaultyPersistence(backend)
    expect(withSharedReads(without).putAttachment).toBeUndefined()
    expect(() => attachmentResolver(without, SessionId('w'))).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_ATTACHMENTS_UNSUPPORTED' }),
    )
    await expect(attachmentBlock(without, SessionId('w'), { bytes: bytesOf(1, 1), mediaType: 'image/png' })).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_ATTACHMENTS_UNSUPPORTED',
    })
  })
})
