import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ATTACHMENT_INLINE_MAX_BYTES, type SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { attachmentFiles } from './attachment-files.js'
import { event, headerOf, targetOf, tempDir } from './helpers.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A root inside a parent directory of its own, so a test can see everything written next to the root. */
function rootInParent(): { parent: string; root: string } {
  const parent = tempDir('dsh-att-')
  cleanups.push(parent.cleanup)
  return { parent: parent.dir, root: join(parent.dir, 'root') }
}

function bytesOf(size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(size)
  let x = seed + 1
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

/** Every path under `dir`, relative, with its permission bits. */
function tree(dir: string, prefix = ''): Array<{ path: string; mode: string; dir: boolean }> {
  const out: Array<{ path: string; mode: string; dir: boolean }> = []
  for (const name of readdirSync(dir).sort()) {
    const stats = lstatSync(join(dir, name))
    const path = join(prefix, name)
    out.push({ path, mode: (stats.mode & 0o777).toString(8), dir: stats.isDirectory() })
    if (stats.isDirectory()) out.push(...tree(join(dir, name), path))
  }
  return out
}

const LARGE = ATTACHMENT_INLINE_MAX_BYTES * 8

describe('jsonl attachments', () => {
  it('live as private files in <session dir>/attachments/<sha256>, nothing beside the root, no temporary file left', async () => {
    const { parent, root } = rootInParent()
    const p = createJsonlPersistence({ root })
    const bytes = bytesOf(LARGE, 1)
    const ref = await p.putAttachment('private' as SessionId, bytes, { mediaType: 'image/png' })
    await p.append(targetOf('private'), [event(0, 'user/message', { text: 'x', blocks: [{ type: 'image', attachment: { ...ref } }] })])
    const source = headerOf('private')
    const seed = (await p.inspect(source.id)).events
    await p.append({ ...targetOf('private-fork', 1, { isSeeded: true, parentSession: 'private' }), forkSource: source.id }, [...seed])
    await p.close()
    expect(readdirSync(parent)).toEqual(['root'])
    const dir = p.logPath('private').split('/').at(-2)!
    const entries = tree(root).filter((e) => e.path.startsWith(dir))
    expect(entries.find((e) => e.path === join(dir, 'attachments'))).toEqual({ path: join(dir, 'attachments'), mode: '700', dir: true })
    expect(entries.find((e) => e.path === dir)).toMatchObject({ mode: '700', dir: true })
    const files = entries.filter((e) => e.path.startsWith(`${join(dir, 'attachments')}/`))
    expect(files).toEqual([{ path: join(dir, 'attachments', ref.digest), mode: '600', dir: false }])
    expect(
      createHash('sha256')
        .update(readFileSync(join(root, files[0]!.path)))
        .digest('hex'),
    ).toBe(ref.digest)
  })

  it('the log holds the reference only: zstd -dc of it shows the digest and none of the bytes', async () => {
    const { root } = rootInParent()
    const p = createJsonlPersistence({ root })
    const bytes = bytesOf(LARGE, 2)
    const ref = await p.putAttachment('zlog' as SessionId, bytes, { mediaType: 'image/png' })
    expect(ref.data).toBeUndefined()
    await p.append(targetOf('zlog'), [event(0, 'user/message', { text: 'see', blocks: [{ type: 'image', attachment: { ...ref } }] })])
    await p.close()
    const plain = execFileSync('zstd', ['-dc', p.logPath('zlog')], { maxBuffer: 64 << 20 }).toString('latin1')
    expect(plain).toContain(ref.digest)
    expect(plain).not.toContain(bytes.toString('base64').slice(0, 64))
    expect(plain).not.toContain(bytes.subarray(0, 64).toString('latin1'))
    expect(plain.length).toBeLessThan(LARGE / 4)
  })

  it('materializing a fork before its source is deleted hard-links the source’s files: no bytes copied', async () => {
    const { root } = rootInParent()
    const p = createJsonlPersistence({ root })
    const ref = await p.putAttachment('m-src' as SessionId, bytesOf(LARGE, 3), { mediaType: 'image/png' })
    await p.append(targetOf('m-src'), [event(0, 'user/message', { text: 'x', blocks: [{ type: 'image', attachment: { ...ref } }] })])
    const seed = (await p.inspect('m-src' as SessionId)).events
    await p.append({ ...targetOf('m-fork', 1, { isSeeded: true, parentSession: 'm-src' }), forkSource: 'm-src' as SessionId }, [...seed])
    expect(attachmentFiles(root)).toHaveLength(1)
    expect(await p.delete('m-src' as SessionId, { materializeDependants: true })).toBe(true)
    const left = attachmentFiles(root)
    expect(left).toEqual([{ place: join(p.logPath('m-fork').split('/').at(-2)!, 'attachments', ref.digest), bytes: LARGE, mode: 0o600 }])
    expect(Buffer.from(await p.readAttachment('m-fork' as SessionId, ref.digest)).equals(bytesOf(LARGE, 3))).toBe(true)
    await p.close()
  })

  it('a damaged file is CORRUPT on read; a symbolic link is never followed; a read-only root refuses a put but reads', async () => {
    const { parent, root } = rootInParent()
    const p = createJsonlPersistence({ root })
    const ref = await p.putAttachment('dmg' as SessionId, bytesOf(LARGE, 4), { mediaType: 'image/png' })
    const file = join(root, attachmentFiles(root)[0]!.place)
    const ro = createJsonlPersistence({ root, readOnly: true })
    expect(Buffer.from(await ro.readAttachment('dmg' as SessionId, ref.digest)).length).toBe(LARGE)
    await expect(ro.putAttachment('dmg' as SessionId, bytesOf(10, 1), { mediaType: 'image/png' })).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_READ_ONLY',
    })
    await ro.close()
    const damaged = readFileSync(file)
    damaged[100]! ^= 0xff
    writeFileSync(file, damaged)
    await expect(p.readAttachment('dmg' as SessionId, ref.digest)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    // A session whose attachments directory is a link out of the root.
    const outside = join(parent, 'outside')
    mkdirSync(outside)
    const linkDir = join(root, p.logPath('lnk').split('/').at(-2)!)
    mkdirSync(linkDir, { mode: 0o700 })
    symlinkSync(outside, join(linkDir, 'attachments'))
    await expect(p.putAttachment('lnk' as SessionId, bytesOf(LARGE, 5), { mediaType: 'image/png' })).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
    })
    expect(readdirSync(outside)).toEqual([])
    rmSync(join(linkDir, 'attachments'))
    await p.close()
  })

  it('the cap is configurable; a bad cap is refused when the backend is made', async () => {
    const { root } = rootInParent()
    const p = createJsonlPersistence({ root, attachmentMaxBytes: 1000 })
    await p.putAttachment('cap' as SessionId, bytesOf(1000, 6), { mediaType: 'application/pdf' })
    await expect(p.putAttachment('cap' as SessionId, bytesOf(1001, 6), { mediaType: 'application/pdf' })).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE',
      details: { size: 1001, maxBytes: 1000 },
    })
    expect(attachmentFiles(root)).toHaveLength(1)
    await p.close()
    expect(() => createJsonlPersistence({ root, attachmentMaxBytes: 0 })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_INVALID_OPTIONS' }),
    )
  })
})
