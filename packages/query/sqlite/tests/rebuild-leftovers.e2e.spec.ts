import { readdirSync, readlinkSync, statSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import type { SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { buildIndexFile, defaultIndexPath, type SqliteSessionQuery } from '../src/index.js'
import { run } from './child.js'
import { header, later, message, openQuery, persist, silent, store, tempDir } from './helpers.js'

// A rebuild killed in the middle (a real child process, SIGKILL) leaves its
// half-built generation file behind. The next writer removes it; a reader
// never does, and no writer removes the file of a rebuild still running in
// another process (it holds the file locked until it publishes it).

const SESSIONS = 150

/** Every entry of the index directory with size and mtime: equal means nothing was written or removed. */
function snapshot(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .map((name) => {
      const stats = statSync(join(dir, name))
      return `${name} ${stats.size} ${stats.mtimeMs}`
    })
}

/** The generation files (`index-*.sqlite`) in the index directory. */
function generations(path: string): string[] {
  return readdirSync(dirname(path))
    .filter((name) => /^index-.+\.sqlite$/.test(name))
    .sort()
}

async function everyId(query: SqliteSessionQuery): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | undefined
  do {
    const page = await query.listSessions({ limit: 100, ...(cursor === undefined ? {} : { cursor }) })
    ids.push(...page.records.map((record) => record.header.id))
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return ids.sort()
}

async function corpus(root: string): Promise<SessionPersistence> {
  const persistence = createJsonlPersistence({ root })
  later(() => persistence.close())
  for (let i = 0; i < SESSIONS; i++)
    await persist(persistence, header(`s${String(i).padStart(3, '0')}`, i), [
      message(0, `heron word${i}`),
      message(1, 'reply', 'assistant/message'),
    ])
  return persistence
}

describe('a rebuild killed by SIGKILL in the middle', () => {
  it.each([
    ['while it indexes event text', 'index'],
    ['with its file complete, before it is published', 'swap'],
  ])(
    '%s: its file survives readers and writers while it runs and readers after, and the next writer removes it',
    {
      timeout: 120_000,
    },
    async (_name, point) => {
      const root = tempDir()
      const persistence = await corpus(root)
      const path = defaultIndexPath(root)
      await buildIndexFile({ persistence, path, logger: silent })
      const current = basename(readlinkSync(path))
      expect(generations(path)).toEqual([current])

      const rebuild = run('rebuilder.mjs', [root, path, point])
      later(() => rebuild.kill('SIGKILL'))
      await rebuild.printed('held')
      const [leftover, ...more] = generations(path).filter((name) => name !== current)
      expect(more).toEqual([])
      expect(leftover).toBeDefined()
      expect(statSync(join(dirname(path), leftover!)).size).toBeGreaterThan(0)

      // The rebuild is running: a writer opening the index now leaves its file alone.
      const busy = await openQuery({ sessions: store().sessions, persistence, path })
      expect(await busy.query.reconcile()).toMatchObject({ failed: 0 })
      await busy.query.close()
      expect(generations(path)).toEqual([current, leftover].sort())

      rebuild.kill('SIGKILL')
      expect((await rebuild.done).signal).toBe('SIGKILL')
      expect(generations(path)).toEqual([current, leftover].sort())

      // A reader, opened after the crash, answers from the index and removes nothing.
      const readOnly = createJsonlPersistence({ root, readOnly: true })
      later(() => readOnly.close())
      const before = snapshot(dirname(path))
      const reader = (await openQuery({ sessions: store().sessions, persistence: readOnly, path, readOnly: true })).query
      expect(await everyId(reader)).toHaveLength(SESSIONS)
      expect((await reader.searchEvents({ text: 'word7' })).hits.map((hit) => hit.id)).toEqual(['s007'])
      expect(await reader.checkIndex()).toEqual({ ok: true })
      expect(snapshot(dirname(path))).toEqual(before)

      // The next writer removes the leftover (and nothing of it is left), and the index is as it was.
      const writer = (await openQuery({ sessions: store().sessions, persistence, path })).query
      expect(generations(path)).toEqual([current])
      expect(readdirSync(dirname(path)).filter((name) => name.startsWith(leftover!))).toEqual([])
      expect(basename(readlinkSync(path))).toBe(current)
      expect(await writer.reconcile()).toMatchObject({ source: 'feed', read: 0, failed: 0, corrupt: 0 })
      expect(await writer.checkIndex()).toEqual({ ok: true })
      expect(await everyId(writer)).toHaveLength(SESSIONS)
      const hits = await writer.searchSessions({ text: 'heron', limit: 100 })
      expect(hits.hits).toHaveLength(100)
      expect(hits.nextCursor).toBeDefined()
      expect((await writer.searchEvents({ text: 'word149' })).hits.map((hit) => [hit.id, hit.seq])).toEqual([['s149', 0]])
      // The reader opened before keeps answering.
      expect(await everyId(reader)).toHaveLength(SESSIONS)
    },
  )
})
