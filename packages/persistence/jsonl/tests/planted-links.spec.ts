import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import type { AppendTarget } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * Symbolic links planted inside a session directory, where this backend
 * writes a file of its own (the `deleting` marker, `refs/` and its fork
 * registrations): each is refused as a damaged entry, and nothing outside
 * the root is written through it.
 */
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function fixture() {
  const { dir, cleanup } = tempDir('dsh-jsonl-planted-')
  cleanups.push(cleanup)
  const root = join(dir, 'root')
  const outside = join(dir, 'outside')
  mkdirSync(outside)
  const p = createJsonlPersistence({ root })
  open.push(p)
  return { root, outside, p }
}

function forkTarget(id: string, source: string, cut: number): AppendTarget {
  return { ...targetOf(id, cut, { isSeeded: true, parentSession: SessionId(source) }), forkSource: SessionId(source) }
}

describe('links planted in a session directory are never written through', () => {
  it.each(['zstd', 'none'] as const)('a symlinked deleting marker is refused; the file it names is untouched (%s)', async (compression) => {
    const { dir, cleanup } = tempDir('dsh-jsonl-planted-')
    cleanups.push(cleanup)
    const root = join(dir, 'root')
    mkdirSync(join(dir, 'outside'))
    const precious = join(dir, 'outside', 'precious.txt')
    const p = createJsonlPersistence({ root, compression })
    open.push(p)
    await p.append(targetOf('t'), eventsFrom(0, 4))
    writeFileSync(precious, 'PRECIOUS\n')
    symlinkSync(precious, join(root, 't', 'deleting'))

    await expect(p.delete(SessionId('t'))).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
      message: expect.stringMatching(/never followed out of the root/),
    })
    expect(readFileSync(precious, 'utf8')).toBe('PRECIOUS\n')
    expect(lstatSync(join(root, 't', 'deleting')).isSymbolicLink()).toBe(true)
    expect((await p.inspect(SessionId('t'))).events).toHaveLength(4)
  })

  it('a dangling symlinked deleting marker creates nothing outside the root', async () => {
    const { root, outside, p } = fixture()
    await p.append(targetOf('t'), eventsFrom(0, 2))
    symlinkSync(join(outside, 'created-by-delete'), join(root, 't', 'deleting'))
    await expect(p.delete(SessionId('t'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    expect(readdirSync(outside)).toEqual([])
  })

  it('a deleting marker hard-linked to a file outside the session is refused; that file is untouched', async () => {
    const { root, outside, p } = fixture()
    await p.append(targetOf('t'), eventsFrom(0, 2))
    const precious = join(outside, 'precious.txt')
    writeFileSync(precious, 'PRECIOUS\n')
    linkSync(precious, join(root, 't', 'deleting'))
    await expect(p.delete(SessionId('t'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    expect(readFileSync(precious, 'utf8')).toBe('PRECIOUS\n')
  })

  it('a stale deleting marker (a regular file) is replaced, and the delete goes through', async () => {
    const { root, p } = fixture()
    await p.append(targetOf('t'), eventsFrom(0, 2))
    writeFileSync(join(root, 't', 'deleting'), JSON.stringify({ host: 'gone.invalid', pid: 1, start: null }), { mode: 0o600 })
    expect(await p.delete(SessionId('t'))).toBe(true)
    expect(existsSync(join(root, 't'))).toBe(false)
  })

  it('a symlinked refs directory of a fork source is refused; no registration is created outside the root', async () => {
    const { root, outside, p } = fixture()
    await p.append(targetOf('src'), eventsFrom(0, 10))
    mkdirSync(join(outside, 'refs-target'))
    symlinkSync(join(outside, 'refs-target'), join(root, 'src', 'refs'))
    const seed = (await p.inspect(SessionId('src'))).events.slice(0, 8)
    await expect(p.append(forkTarget('kid', 'src', 8), [...seed, ...eventsFrom(8, 2)])).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
      message: expect.stringMatching(/refs/),
    })
    expect(readdirSync(join(outside, 'refs-target'))).toEqual([])
    expect(existsSync(join(root, 'kid'))).toBe(false)
    expect((await p.inspect(SessionId('src'))).events).toHaveLength(10)
  })

  it('a symlinked fork registration is refused; the file it names is not created', async () => {
    const { root, outside, p } = fixture()
    await p.append(targetOf('src'), eventsFrom(0, 10))
    mkdirSync(join(root, 'src', 'refs'), { mode: 0o700 })
    symlinkSync(join(outside, 'registration'), join(root, 'src', 'refs', 'kid'))
    const seed = (await p.inspect(SessionId('src'))).events.slice(0, 8)
    await expect(p.append(forkTarget('kid', 'src', 8), [...seed, ...eventsFrom(8, 2)])).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
    })
    expect(readdirSync(outside)).toEqual([])
  })
})
