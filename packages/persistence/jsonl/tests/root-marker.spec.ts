import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createJsonlPersistence, MARKER_FILE } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from './helpers.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A root whose marker the test then rewrites. */
async function root(): Promise<string> {
  const { dir, cleanup } = tempDir('dsh-jsonl-marker-')
  cleanups.push(cleanup)
  await createJsonlPersistence({ root: dir }).close()
  return dir
}

describe('the root marker', () => {
  it('is written once, naming the format, root version 1 and the encoding', async () => {
    const dir = await root()
    expect(JSON.parse(readFileSync(join(dir, MARKER_FILE), 'utf8'))).toEqual({
      format: 'dsh-session-persistence-jsonl',
      version: 1,
      compression: 'zstd',
    })
  })

  it.each([
    ['another root version', { format: 'dsh-session-persistence-jsonl', version: 2, compression: 'zstd' }, 'root version 2'],
    ['another format', { format: 'something-else', version: 1, compression: 'zstd' }, 'format "something-else"'],
    ['an unknown compression', { format: 'dsh-session-persistence-jsonl', version: 1, compression: 'lz4' }, 'compression "lz4"'],
    ['text that is not JSON', 'not json', 'is not a JSON marker'],
  ])('naming %s is refused, writable or read-only, and left as it is', async (_, marker, says) => {
    const dir = await root()
    const path = join(dir, MARKER_FILE)
    writeFileSync(path, typeof marker === 'string' ? marker : JSON.stringify(marker))
    const before = readFileSync(path)
    const refused = {
      code: 'JSONL_PERSISTENCE_UNSUPPORTED_ROOT',
      message: expect.stringContaining(says),
      details: expect.objectContaining({ root: dir }),
    }
    expect(() => createJsonlPersistence({ root: dir })).toThrow(expect.objectContaining(refused))
    expect(() => createJsonlPersistence({ root: dir, readOnly: true })).toThrow(expect.objectContaining(refused))
    expect(readFileSync(path).equals(before)).toBe(true)
  })
})
