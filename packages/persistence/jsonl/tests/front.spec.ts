import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { SessionPersistenceError } from '@dsh/session-persistence'
import { createJsonlPersistence, JOURNAL_FILE } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * The backend's front loads the log side at the first operation on a log
 * (`src/create.ts`); these pin that nothing about the contract changes with
 * it: operations called before it loads run in call order, `close()` waits
 * for them, and a closed backend refuses typed without loading anything.
 */
const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function root(): string {
  const { dir, cleanup } = tempDir('dsh-jsonl-front-')
  cleanups.push(cleanup)
  return dir
}

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise
    return undefined
  } catch (error) {
    expect(error).toBeInstanceOf(SessionPersistenceError)
    return (error as SessionPersistenceError).code
  }
}

describe('the backend front', () => {
  it.each(['zstd', 'none'] as const)(
    'operations called at once on a fresh backend (%s) run in call order, and close() waits for them',
    async (compression) => {
      const dir = root()
      const p = createJsonlPersistence({ root: dir, compression })
      // None awaited before the next is called: the log side is still loading for all of them (appends of one
      // session are serialized; reads take no lock and are not ordered after appends, with or without the front).
      const first = p.append(targetOf('a'), eventsFrom(0, 3))
      const second = p.append(targetOf('a'), eventsFrom(3, 2))
      const conflicting = p.append(targetOf('a'), eventsFrom(3, 1))
      const closed = p.close()
      expect((await first).nextSeq).toBe(3)
      expect((await second).nextSeq).toBe(5)
      expect(await codeOf(conflicting)).toBe('SESSION_PERSISTENCE_CONFLICT')
      await closed
      // Everything acknowledged is on disk.
      const reopened = createJsonlPersistence({ root: dir, readOnly: true })
      expect((await reopened.inspect(SessionId('a'))).events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
      await reopened.close()
    },
  )

  it('logPath names the file the log side writes, before anything is loaded', async () => {
    for (const compression of ['zstd', 'none'] as const) {
      const dir = root()
      const p = createJsonlPersistence({ root: dir, compression })
      const path = p.logPath('s')
      expect(path).toBe(join(dir, 's', compression === 'zstd' ? 'log.jsonl.zst' : 'log.jsonl'))
      expect(existsSync(path)).toBe(false)
      await p.append(targetOf('s'), eventsFrom(0, 1))
      expect(existsSync(path)).toBe(true)
      await p.close()
    }
  })

  it('a backend closed before any operation on a log refuses every operation with SESSION_PERSISTENCE_CLOSED', async () => {
    const dir = root()
    const p = createJsonlPersistence({ root: dir })
    expect(existsSync(join(dir, JOURNAL_FILE))).toBe(true)
    expect((await p.changes()).rescan).toBe(true)
    expect(p.damagedLogs()).toEqual([])
    await p.close()
    await p.close() // idempotent
    expect(await codeOf(p.append(targetOf('x'), eventsFrom(0, 1)))).toBe('SESSION_PERSISTENCE_CLOSED')
    expect(await codeOf(p.list())).toBe('SESSION_PERSISTENCE_CLOSED')
    expect(await codeOf(p.inspect(SessionId('x')))).toBe('SESSION_PERSISTENCE_CLOSED')
    expect(await codeOf(p.changes())).toBe('SESSION_PERSISTENCE_CLOSED')
    expect(await codeOf(p.verifyChangeJournal())).toBe('SESSION_PERSISTENCE_CLOSED')
    expect(existsSync(join(dir, 'x'))).toBe(false)
  })

  it('metrics are one object counted by both sides (rescans by the feed, reads by the log side)', async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir })
    await writer.append(targetOf('m'), eventsFrom(0, 2))
    await writer.close()
    const p = createJsonlPersistence({ root: dir, readOnly: true })
    const metrics = p.metrics
    await p.changes()
    expect(metrics.rescans).toBe(1)
    expect(await p.list()).toHaveLength(1)
    expect(metrics.headerReads).toBe(1)
    expect(p.metrics).toBe(metrics)
    expect((await p.verifyChangeJournal()).rescans).toBe(1)
    await p.close()
  })
})
