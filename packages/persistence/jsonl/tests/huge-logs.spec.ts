import { statSync, truncateSync } from 'node:fs'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { READ_MAX_BYTES } from '../src/fs-io.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A log larger than one read can hold (Node's largest Buffer): every read
 * that needs it whole is refused with a typed error naming the limit, never
 * an untyped RangeError. The log is a real one extended to 5 GiB as a sparse
 * file (its tail a hole: no disk space used).
 */
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('a log over the read limit', () => {
  it.each(['zstd', 'none'] as const)('inspect, verify, load and append reject with SESSION_PERSISTENCE_IO (%s)', async (compression) => {
    const { dir, cleanup } = tempDir('dsh-jsonl-huge-')
    cleanups.push(cleanup)
    const setup = createJsonlPersistence({ root: dir, compression })
    await setup.append(targetOf('big'), eventsFrom(0, 10))
    await setup.close()
    const file = setup.logPath('big')
    truncateSync(file, 5 * 1024 ** 3)
    expect(statSync(file).size).toBeGreaterThan(READ_MAX_BYTES)

    const p = createJsonlPersistence({ root: dir, compression })
    open.push(p)
    const tooLarge = {
      code: 'SESSION_PERSISTENCE_IO',
      message: expect.stringMatching(/too large to read/),
      details: { file, bytes: 5 * 1024 ** 3, limit: READ_MAX_BYTES },
    }
    await expect(p.inspect(SessionId('big'))).rejects.toMatchObject(tooLarge)
    await expect(p.verify(SessionId('big'))).rejects.toMatchObject(tooLarge)
    await expect(p.load(SessionId('big'))).rejects.toMatchObject(tooLarge)
    await expect(p.append(targetOf('big'), eventsFrom(10, 1))).rejects.toMatchObject(tooLarge)
    // Header-only reads still answer.
    expect((await p.list()).map((r) => r.header.id)).toEqual(['big'])
    expect(statSync(file).size).toBe(5 * 1024 ** 3)
  })
})
