import { readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, MARKER_FILE } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})
function fresh(): string {
  const { dir, cleanup } = tempDir('dsh-jsonl-ro-')
  cleanups.push(cleanup)
  return dir
}

describe('read-only open', () => {
  it('refuses a directory that is not a dsh root and creates nothing in it', () => {
    const dir = fresh()
    writeFileSync(join(dir, 'notes.txt'), 'mine')
    const before = readdirSync(dir)
    expect(() => createJsonlPersistence({ root: dir, readOnly: true })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_NOT_A_ROOT' }),
    )
    expect(() => createJsonlPersistence({ root: join(dir, 'missing'), readOnly: true })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_NOT_A_ROOT' }),
    )
    expect(() => createJsonlPersistence({ root: join(dir, 'notes.txt'), readOnly: true })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_NOT_A_ROOT' }),
    )
    expect(readdirSync(dir)).toEqual(before)
  })

  it('reads an existing root in its own encoding, rejects writes, and writes nothing', async () => {
    const dir = fresh()
    const writer = createJsonlPersistence({ root: dir, compression: 'none' })
    await writer.append(targetOf('a'), eventsFrom(0, 3))
    await writer.close()
    const listing = (): string[] => readdirSync(dir, { recursive: true }).map(String).sort()
    const before = listing()
    const sizes = before.map((name) => statSync(join(dir, name)).size)
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    expect(reader.compression).toBe('none')
    expect((await reader.list()).map((r) => r.header.id)).toEqual(['a'])
    expect((await reader.inspect(SessionId('a'))).events).toHaveLength(3)
    await expect(reader.append(targetOf('b'), eventsFrom(0, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    await expect(reader.load(SessionId('a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    await expect(reader.delete(SessionId('a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
    await reader.changes()
    await reader.close()
    expect(listing()).toEqual(before)
    expect(before.map((name) => statSync(join(dir, name)).size)).toEqual(sizes)
  })

  it('still checks an explicitly requested encoding', async () => {
    const dir = fresh()
    await createJsonlPersistence({ root: dir, compression: 'zstd' }).close()
    expect(() => createJsonlPersistence({ root: dir, compression: 'none', readOnly: true })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_ENCODING_MISMATCH' }),
    )
  })
})

describe('private files', () => {
  it('creates the root 0700, session directories 0700 and every file 0600', async () => {
    const parent = fresh()
    const root = join(parent, 'root')
    const p = createJsonlPersistence({ root })
    await p.append(targetOf('a'), eventsFrom(0, 2))
    const modeOf = (path: string): number => statSync(path).mode & 0o777
    expect(modeOf(root)).toBe(0o700)
    expect(modeOf(join(root, MARKER_FILE))).toBe(0o600)
    const sessionDir = join(root, 'a')
    expect(modeOf(sessionDir)).toBe(0o700)
    for (const name of readdirSync(sessionDir)) expect([name, modeOf(join(sessionDir, name))]).toEqual([name, 0o600])
    for (const name of readdirSync(root)) {
      const path = join(root, name)
      if (statSync(path).isFile()) expect([name, modeOf(path)]).toEqual([name, 0o600])
    }
    await p.close()
  })
})
