import { createHash } from 'node:crypto'
import { ATTACHMENT_INLINE_MAX_BYTES, type AttachmentRef, type SessionId } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { ATTACHMENT_MAX_BYTES } from '../attachments.js'
import type { AppendTarget, SessionPersistence } from '../types.js'
import {
  event,
  events,
  expectCode,
  type FreshHarness,
  header,
  type PersistenceContractHarness,
  type StoredAttachmentCopy,
  target,
} from './fixtures.js'

type AttachmentStore = Required<Pick<SessionPersistence, 'putAttachment' | 'readAttachment'>>

/**
 * The backend's attachment methods. They are optional in the contract: a
 * backend without them has neither (checked here), and each case then
 * asserts only that.
 */
function store(p: SessionPersistence): AttachmentStore | undefined {
  if (p.putAttachment === undefined || p.readAttachment === undefined) {
    expect({ put: typeof p.putAttachment, read: typeof p.readAttachment }).toEqual({ put: 'undefined', read: 'undefined' })
    return undefined
  }
  return p as SessionPersistence & AttachmentStore
}

/** `size` bytes that differ per `seed` (not all zero, so a short read or a swapped file shows). */
function bytesOf(size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(size)
  let x = seed * 2654435761 + 1
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

async function stored(harness: PersistenceContractHarness): Promise<{ copies: StoredAttachmentCopy[]; bytes: number }> {
  const copies = (await harness.storedAttachments?.()) ?? []
  return { copies, bytes: copies.reduce((n, c) => n + c.bytes, 0) }
}

/** A user message with an image block, as a log line holds it: the reference only. */
function imageMessage(seq: number, ref: AttachmentRef) {
  return event(seq, 'user/message', { text: 'look', blocks: [{ type: 'image', attachment: { ...ref } }] })
}

const LARGE = ATTACHMENT_INLINE_MAX_BYTES * 4 + 7

/** Attachments: content-addressed bytes beside a session, read by forks through the reference, deleted with the last reader. */
export function describeAttachments(fresh: FreshHarness): void {
  describe('attachments', () => {
    it('put returns a SHA-256 reference (inline bytes only at or below the threshold) and read returns the bytes, across a reopen', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const id = header('att-round').id
      const small = bytesOf(100, 1)
      const large = bytesOf(LARGE, 2)
      const smallRef = await p.putAttachment(id, small, { mediaType: 'image/png', name: 'dot.png' })
      const largeRef = await p.putAttachment(id, large, { mediaType: 'application/pdf' })
      expect(smallRef).toEqual({
        digest: sha256(small),
        mediaType: 'image/png',
        size: 100,
        name: 'dot.png',
        data: small.toString('base64'),
      })
      expect(largeRef).toEqual({ digest: sha256(large), mediaType: 'application/pdf', size: LARGE })
      await harness.persistence.append(target(header('att-round')), [imageMessage(0, largeRef)])
      let q = p
      for (const reopen of [false, true]) {
        if (reopen) q = store(await harness.reopen())!
        expect(Buffer.from(await q.readAttachment(id, largeRef.digest)).equals(large)).toBe(true)
        expect(Buffer.from(await q.readAttachment(id, smallRef.digest)).equals(small)).toBe(true)
      }
      // Another session does not read them.
      await expectCode(q.readAttachment(header('att-other').id, largeRef.digest), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
    })

    it('putting equal bytes again returns an equal reference and stores nothing new', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const id = header('att-idem').id
      const bytes = bytesOf(LARGE, 3)
      const first = await p.putAttachment(id, bytes, { mediaType: 'image/jpeg' })
      const before = await stored(harness)
      const second = await p.putAttachment(id, Buffer.from(bytes), { mediaType: 'image/jpeg' })
      expect(second).toEqual(first)
      const after = await stored(harness)
      expect(after.copies.length).toBe(before.copies.length)
      expect(after.bytes).toBe(before.bytes)
      if (harness.storedAttachments !== undefined) expect(after).toMatchObject({ bytes: LARGE, copies: [{ bytes: LARGE }] })
    })

    it('bytes over the cap are ATTACHMENT_TOO_LARGE and nothing is stored; bad input and unknown digests are typed', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const id = header('att-cap').id
      const huge = Buffer.alloc(ATTACHMENT_MAX_BYTES + 1, 7)
      await expectCode(p.putAttachment(id, huge, { mediaType: 'image/png' }), 'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE')
      expect((await stored(harness)).copies).toEqual([])
      await expectCode(p.readAttachment(id, sha256(huge)), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
      await expectCode(
        p.putAttachment(id, 'text' as unknown as Uint8Array, { mediaType: 'text/plain' }),
        'SESSION_PERSISTENCE_INVALID_ATTACHMENT',
      )
      await expectCode(p.putAttachment(id, bytesOf(10, 4), { mediaType: 'png' }), 'SESSION_PERSISTENCE_INVALID_ATTACHMENT')
      await expectCode(p.putAttachment(id, bytesOf(10, 4), {} as { mediaType: string }), 'SESSION_PERSISTENCE_INVALID_ATTACHMENT')
      await expectCode(p.readAttachment(id, '../../etc/passwd'), 'SESSION_PERSISTENCE_INVALID_ATTACHMENT')
      await expectCode(p.readAttachment(id, 'A'.repeat(64)), 'SESSION_PERSISTENCE_INVALID_ATTACHMENT')
      await expectCode(p.putAttachment('' as SessionId, bytesOf(10, 4), { mediaType: 'image/png' }), 'SESSION_PERSISTENCE_INVALID_ID')
      expect((await stored(harness)).copies).toEqual([])
    })

    it('a fork reads its source’s attachments through the reference: no bytes are stored for it, along a chain too', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const source = header('att-src')
      const bytes = bytesOf(LARGE, 5)
      const ref = await p.putAttachment(source.id, bytes, { mediaType: 'image/png' })
      await harness.persistence.append(target(source), [imageMessage(0, ref), ...events(1, 2)])
      const before = await stored(harness)
      const seed = (await harness.persistence.inspect(source.id)).events
      const child = header('att-fork', { isSeeded: true, parentSession: 'att-src' })
      await harness.persistence.append({ ...target(child, 3), forkSource: source.id }, [...seed, ...events(3, 1, 'own')])
      const grandchild = header('att-fork2', { isSeeded: true, parentSession: 'att-fork' })
      const seed2 = (await harness.persistence.inspect(child.id)).events
      await harness.persistence.append({ ...target(grandchild, 4), forkSource: child.id }, [...seed2, ...events(4, 1, 'gc')])
      for (const id of [child.id, grandchild.id]) expect(Buffer.from(await p.readAttachment(id, ref.digest)).equals(bytes)).toBe(true)
      const q = store(await harness.reopen())!
      expect(Buffer.from(await q.readAttachment(grandchild.id, ref.digest)).equals(bytes)).toBe(true)
      const after = await stored(harness)
      expect(after.copies.length).toBe(before.copies.length)
      expect(after.bytes).toBe(before.bytes)
      // What a fork stores itself stays its own: the source does not read it.
      const own = await q.putAttachment(child.id, bytesOf(LARGE, 6), { mediaType: 'image/png' })
      await expectCode(q.readAttachment(source.id, own.digest), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
    })

    it('deleting a source whose attachments a fork reads is REFERENCED; materialized, the fork keeps reading them', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const source = header('att-ref-src')
      const bytes = bytesOf(LARGE, 7)
      const ref = await p.putAttachment(source.id, bytes, { mediaType: 'image/webp' })
      await harness.persistence.append(target(source), [imageMessage(0, ref)])
      const seed = (await harness.persistence.inspect(source.id)).events
      const child = header('att-ref-fork', { isSeeded: true, parentSession: 'att-ref-src' })
      const forkTarget: AppendTarget = { ...target(child, 1), forkSource: source.id }
      await harness.persistence.append(forkTarget, [...seed, ...events(1, 1, 'own')])
      await expectCode(harness.persistence.delete(source.id), 'SESSION_PERSISTENCE_REFERENCED')
      expect(await harness.persistence.stat(source.id)).toBeDefined()
      expect(Buffer.from(await p.readAttachment(source.id, ref.digest)).equals(bytes)).toBe(true)
      expect(await harness.persistence.delete(source.id, { materializeDependants: true })).toBe(true)
      await expectCode(p.readAttachment(source.id, ref.digest), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
      expect(Buffer.from(await p.readAttachment(child.id, ref.digest)).equals(bytes)).toBe(true)
      expect((await stored(harness)).bytes).toBe(harness.storedAttachments === undefined ? 0 : LARGE)
      // Now the fork's own: deleting it removes the last copy.
      expect(await harness.persistence.delete(child.id)).toBe(true)
      expect((await stored(harness)).copies).toEqual([])
    })

    it('deleting a session removes its attachments; equal bytes another session stored stay readable there', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      const a = header('att-del-a')
      const b = header('att-del-b')
      const shared = bytesOf(LARGE, 8)
      const onlyA = bytesOf(LARGE, 9)
      const refShared = await p.putAttachment(a.id, shared, { mediaType: 'image/png' })
      const refA = await p.putAttachment(a.id, onlyA, { mediaType: 'image/png' })
      await p.putAttachment(b.id, shared, { mediaType: 'image/png' })
      await harness.persistence.append(target(a), [imageMessage(0, refShared), imageMessage(1, refA)])
      await harness.persistence.append(target(b), [imageMessage(0, refShared)])
      expect(await harness.persistence.delete(a.id)).toBe(true)
      await expectCode(p.readAttachment(a.id, refA.digest), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
      await expectCode(p.readAttachment(a.id, refShared.digest), 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND')
      expect(Buffer.from(await p.readAttachment(b.id, refShared.digest)).equals(shared)).toBe(true)
      const left = await stored(harness)
      if (harness.storedAttachments !== undefined) expect(left.bytes).toBe(LARGE)
      expect(await harness.persistence.delete(b.id)).toBe(true)
      expect((await stored(harness)).copies).toEqual([])
    })

    it('stored attachment files are private (0600)', async () => {
      const harness = await fresh()
      const p = store(harness.persistence)
      if (p === undefined) return
      await p.putAttachment(header('att-mode').id, bytesOf(LARGE, 10), { mediaType: 'image/png' })
      await p.putAttachment(header('att-mode').id, bytesOf(10, 11), { mediaType: 'image/png' })
      const { copies } = await stored(harness)
      for (const copy of copies)
        if (copy.mode !== undefined) expect({ place: copy.place, mode: copy.mode.toString(8) }).toEqual({ place: copy.place, mode: '600' })
    })
  })
}
