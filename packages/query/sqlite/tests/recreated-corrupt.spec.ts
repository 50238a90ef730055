import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, TRAILER_MAGIC } from '@dsh/session-persistence-jsonl'
import type { SessionQueryRecord } from '@dsh/session-query'
import { describe, expect, it } from 'vitest'
import { buildIndexFile, defaultIndexPath } from '../src/index.js'
import { header, later, message, openQuery, persist, silent, store, tempDir } from './helpers.js'

// A log whose body cannot be read is still a persisted session: its header
// frame reads, so a full rebuild lists it (a header-only listing) with its
// text dropped. The writer's incremental catch-up through the change feed
// must list the same row, also for an id whose earlier lifecycle was
// deleted and whose log was written again and then damaged (`dsh demo` on a
// rerun). Deleting the index changes only cost, never the answer.

/** Flips one byte inside the last committed data frame of `file` (a few bytes before its trailer), as a disk would. */
function flipInLastBatch(file: string): void {
  const bytes = readFileSync(file)
  const magic = Buffer.alloc(4)
  magic.writeUInt32LE(TRAILER_MAGIC)
  const trailer = bytes.lastIndexOf(magic)
  expect(trailer).toBeGreaterThan(16)
  bytes[trailer - 6]! ^= 0x5a
  writeFileSync(file, bytes)
}

/** What a listing shows of each record: enough to tell two listings apart. */
function rows(records: readonly SessionQueryRecord[]) {
  return records.map((r) => ({ header: r.header, inherited: r.inheritedEventCount, revision: r.revision, persisted: r.persisted }))
}

/** The listing of a full rebuild of the same root, into an index of its own. */
async function rebuiltListing(root: string): Promise<ReturnType<typeof rows>> {
  const backend = createJsonlPersistence({ root, readOnly: true })
  later(() => backend.close())
  const path = join(tempDir(), 'rebuilt', 'index.sqlite')
  expect(await buildIndexFile({ persistence: backend, path, logger: silent })).toMatchObject({ source: 'rescan', corrupt: 1 })
  const { query } = await openQuery({ sessions: store().sessions, persistence: backend, path, readOnly: true })
  return rows((await query.listSessions()).records)
}

describe('a corrupt log the change feed names', () => {
  for (const between of ['caught up between', 'not caught up between'] as const) {
    it(`is listed by the incremental catch-up as by a rebuild, after its id was deleted and written again (${between})`, async () => {
      const root = tempDir()
      const backend = createJsonlPersistence({ root })
      later(() => backend.close())
      await persist(backend, header('parent', 100), [message(0, 'plan the release'), message(1, 'delegating', 'assistant/message')])
      const child = header('child', 110, { parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
      await persist(backend, child, [message(0, 'summarize build.log')])
      await persist(backend, child, [message(1, 'the build is green', 'assistant/message')])
      const { query } = await openQuery({ sessions: store().sessions, persistence: backend, path: defaultIndexPath(root) })
      expect((await query.listSessions()).records.map((r) => r.header.id)).toEqual(['parent', 'child'])

      // The rerun: deleted, then written again under the same ids, then one byte of the child flipped behind dsh's back.
      expect(await backend.delete(SessionId('child'))).toBe(true)
      expect(await backend.delete(SessionId('parent'))).toBe(true)
      if (between === 'caught up between') expect(await query.reconcile()).toMatchObject({ source: 'feed', removed: 2 })
      await persist(backend, header('parent', 200), [message(0, 'plan the release again')])
      const again = header('child', 210, { parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
      await persist(backend, again, [message(0, 'summarize build.log again')])
      await persist(backend, again, [message(1, 'the build is red', 'assistant/message')])
      flipInLastBatch(backend.logPath('child'))
      const rebuilt = await rebuiltListing(root)
      expect(rebuilt.map((r) => [r.header.id, r.header.createdAt])).toEqual([
        ['parent', 200],
        ['child', 210],
      ])
      expect(rebuilt[1]!.revision).toBe(await backend.stat(SessionId('child')))

      // A reader of the index, behind the logs, answers index + overlay: the same rows.
      const reader = await openQuery({ sessions: store().sessions, persistence: backend, path: defaultIndexPath(root), readOnly: true })
      expect(rows((await reader.query.listSessions()).records)).toEqual(rebuilt)

      expect(await query.reconcile()).toMatchObject({ source: 'feed', corrupt: 1, failed: 0 })
      expect(rows((await query.listSessions()).records)).toEqual(rebuilt)
      expect(rows((await reader.query.listSessions()).records)).toEqual(rebuilt)
      // Its text is gone from search, as after a rebuild; the other session's stays.
      expect((await query.searchEvents({ text: 'build' })).hits).toEqual([])
      expect((await query.searchEvents({ text: 'again' })).hits.map((h) => h.id)).toEqual(['parent'])
      // Marked at that revision: the next pass reads nothing.
      expect(await query.reconcile()).toMatchObject({ read: 0, corrupt: 0 })
    })
  }

  it('is listed by the incremental catch-up as by a rebuild when it is new', async () => {
    const root = tempDir()
    const backend = createJsonlPersistence({ root })
    later(() => backend.close())
    await persist(backend, header('parent', 100), [message(0, 'plan the release')])
    const { query } = await openQuery({ sessions: store().sessions, persistence: backend, path: defaultIndexPath(root) })
    const child = header('child', 110, { parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
    await persist(backend, child, [message(0, 'summarize build.log')])
    await persist(backend, child, [message(1, 'the build is green', 'assistant/message')])
    flipInLastBatch(backend.logPath('child'))

    const rebuilt = await rebuiltListing(root)
    expect(rebuilt.map((r) => r.header.id)).toEqual(['parent', 'child'])
    expect(rows((await query.listSessions()).records)).toEqual(rebuilt)
    expect(await query.reconcile()).toMatchObject({ source: 'feed', corrupt: 1, failed: 0 })
    expect(rows((await query.listSessions()).records)).toEqual(rebuilt)
  })
})
