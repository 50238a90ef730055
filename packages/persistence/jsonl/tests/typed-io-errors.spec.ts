import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { WriterLock } from '../src/writer-lock.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * File system faults surface as typed errors with the errno kept in `cause`,
 * never as a bare errno. The faults are ones no permission bit lifts (they
 * hold for root too): a directory where a file belongs, a file where a
 * directory belongs, a symbolic link.
 */
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close().catch(() => {})
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function scratch(): string {
  const { dir, cleanup } = tempDir('dsh-jsonl-typed-io-')
  cleanups.push(cleanup)
  return dir
}

const errno = (code: string) => ({ cause: expect.objectContaining({ code }) })

describe('opening a root', () => {
  it('a root whose parent is a file: SESSION_PERSISTENCE_IO (ENOTDIR)', () => {
    const dir = scratch()
    writeFileSync(join(dir, 'file'), 'not a directory')
    expect(() => createJsonlPersistence({ root: join(dir, 'file', 'root') })).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_IO', cause: expect.objectContaining({ code: 'ENOTDIR' }) }),
    )
  })

  it('a marker that is a directory: JSONL_PERSISTENCE_UNSUPPORTED_ROOT (EISDIR)', () => {
    const root = join(scratch(), 'root')
    mkdirSync(join(root, 'dsh-persistence.json'), { recursive: true })
    expect(() => createJsonlPersistence({ root })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_UNSUPPORTED_ROOT', cause: expect.objectContaining({ code: 'EISDIR' }) }),
    )
  })

  it('a symlinked change journal: SESSION_PERSISTENCE_IO, and the file it names is untouched', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    const first = createJsonlPersistence({ root })
    await first.append(targetOf('a'), eventsFrom(0, 2))
    await first.close()
    const outside = join(dir, 'outside.txt')
    writeFileSync(outside, 'OUTSIDE')
    rmSync(join(root, JOURNAL_FILE))
    symlinkSync(outside, join(root, JOURNAL_FILE))
    expect(() => createJsonlPersistence({ root })).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_IO', message: expect.stringMatching(/never followed out of the root/) }),
    )
    expect(readFileSync(outside, 'utf8')).toBe('OUTSIDE')
  })

  it('a directory in place of the change journal: SESSION_PERSISTENCE_IO', () => {
    const root = join(scratch(), 'root')
    mkdirSync(join(root, JOURNAL_FILE), { recursive: true })
    expect(() => createJsonlPersistence({ root })).toThrow(expect.objectContaining({ code: 'SESSION_PERSISTENCE_IO' }))
  })
})

describe('operations on sessions', () => {
  it('delete of a session whose log path is a directory: SESSION_PERSISTENCE_CORRUPT, the directory kept', async () => {
    const root = join(scratch(), 'root')
    const p = createJsonlPersistence({ root })
    open.push(p)
    mkdirSync(join(root, 'bad', 'log.jsonl.zst', 'inside'), { recursive: true })
    await expect(p.delete(SessionId('bad'))).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
      cause: expect.objectContaining({ code: 'EISDIR' }),
    })
    expect(existsSync(join(root, 'bad', 'log.jsonl.zst', 'inside'))).toBe(true)
    // The lock was released: the same delete fails the same way, not with LOCKED.
    await expect(p.delete(SessionId('bad'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })

  it('writerOf a session whose writer lock is a directory: SESSION_PERSISTENCE_IO (EISDIR)', async () => {
    const root = join(scratch(), 'root')
    const p = createJsonlPersistence({ root })
    open.push(p)
    await p.append(targetOf('a'), eventsFrom(0, 2))
    await p.close()
    mkdirSync(join(root, 'a', 'writer.lock'))
    const reader = createJsonlPersistence({ root, readOnly: true })
    open.push(reader)
    await expect(reader.writerOf(SessionId('a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO', ...errno('EISDIR') })
    // A session directory replaced by a file has no writer (the file is reported by whoever opens the log).
    writeFileSync(join(root, 'plain'), 'x')
    expect(await reader.writerOf(SessionId('plain'))).toBeUndefined()
  })

  it('a writer lock whose directory is replaced by a file cannot be checked: SESSION_PERSISTENCE_IO (ENOTDIR)', async () => {
    const dir = scratch()
    mkdirSync(join(dir, 's'))
    const lock = await WriterLock.acquire(join(dir, 's', 'writer.lock'), '"s"')
    renameSync(join(dir, 's'), join(dir, 'moved'))
    writeFileSync(join(dir, 's'), 'a file where the session directory was')
    await expect(lock.verify('"s"', 0)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO', ...errno('ENOTDIR') })
  })
})
