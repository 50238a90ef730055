import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A FIFO planted where a log or the change journal should be: opening it for
 * reading must not wait for a writer that never comes. It is refused like
 * any other entry that is not a regular file, and the rest of the root reads.
 */
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function mkfifo(path: string): void {
  execFileSync('mkfifo', ['-m', '600', path])
}

async function fixture() {
  const { dir, cleanup } = tempDir('dsh-jsonl-fifo-')
  cleanups.push(cleanup)
  const writer = createJsonlPersistence({ root: dir })
  await writer.append(targetOf('good'), eventsFrom(0, 3))
  await writer.close()
  return dir
}

describe('FIFOs in a root are refused, never waited on', () => {
  it('a FIFO where a log should be is a damaged entry; the good session still lists and reads', async () => {
    const dir = await fixture()
    mkdirSync(join(dir, 'piped'), { mode: 0o700 })
    mkfifo(join(dir, 'piped', 'log.jsonl.zst'))
    const p = createJsonlPersistence({ root: dir, readOnly: true })
    open.push(p)
    expect((await p.list()).map((r) => r.header.id)).toEqual(['good'])
    expect(p.damagedLogs()).toEqual([expect.objectContaining({ id: 'piped', code: 'SESSION_PERSISTENCE_CORRUPT' })])
    await expect(p.inspect(SessionId('piped'))).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_CORRUPT',
      message: expect.stringMatching(/not a regular file/),
    })
    expect((await p.inspect(SessionId('good'))).events).toHaveLength(3)
  })

  it('a FIFO in place of the change journal is a typed error for followers and verify', async () => {
    const dir = await fixture()
    rmSync(join(dir, JOURNAL_FILE))
    mkfifo(join(dir, JOURNAL_FILE))
    const p = createJsonlPersistence({ root: dir, readOnly: true })
    open.push(p)
    await expect(p.changes()).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_IO',
      message: expect.stringMatching(/not a regular file/),
    })
    expect(await p.verifyChangeJournal()).toMatchObject({ ok: false, reason: expect.stringMatching(/not a regular file/) })
    expect((await p.inspect(SessionId('good'))).events).toHaveLength(3)
  })
})
