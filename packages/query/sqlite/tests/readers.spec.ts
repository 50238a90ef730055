import { readdirSync, readlinkSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { buildIndexFile, createSqliteSessionQuery, type SqliteSessionQuery } from '../src/index.js'
import { code, header, later, message, openQuery, persist, silent, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

// Readers and the writer of one index file, in one process: a reader only
// reads (what changed comes from the logs), a rebuild swaps a new
// generation in, and holders of the old one notice and reopen.

/** Every file beside the index path, with size and mtime: equal means nothing was written. */
function files(path: string): string[] {
  const dir = dirname(path)
  return readdirSync(dir)
    .map((name) => {
      const stats = statSync(join(dir, name), { throwIfNoEntry: false })
      return `${name} ${stats?.size ?? '-'} ${stats?.mtimeMs ?? '-'}`
    })
    .sort()
}

async function reader(persistence: SessionPersistence, path: string, overlayLimit?: number): Promise<SqliteSessionQuery> {
  const query = await createSqliteSessionQuery({
    sessions: store().sessions,
    persistence,
    path,
    readOnly: true,
    logger: silent,
    ...(overlayLimit === undefined ? {} : { overlayLimit }),
  })
  later(() => query.close())
  return query
}

async function written(count: number): Promise<{ persistence: SessionPersistence; path: string; reads: { logs: number } }> {
  const { persistence, reads } = countReads(createMemoryPersistence())
  for (let i = 0; i < count; i++) await persist(persistence, header(`s${i}`, i), [message(0, `heron ${i}`)])
  const path = join(tempDir(), '.dsh', 'index.sqlite')
  const { query } = await openQuery({ sessions: store().sessions, persistence, path })
  await query.close()
  return { persistence, path, reads }
}

describe('a reader', () => {
  it('answers what changed since the index from the logs (O(changes)), and writes nothing', async () => {
    const { persistence, path, reads } = await written(30)
    for (let i = 30; i < 35; i++) await persist(persistence, header(`s${i}`, i), [message(0, `otter ${i}`)])
    await persist(persistence, header('s2', 2), [message(1, 'an otter joins')])
    await persistence.delete('s7' as never)
    const before = files(path)
    const logs = reads.logs
    const query = await reader(persistence, path)
    expect(await query.reconcile()).toMatchObject({ source: 'feed', changed: 7, read: 0 })
    const ids = (await query.listSessions()).records.map((r) => r.header.id)
    expect(ids).toHaveLength(34)
    expect(ids).not.toContain('s7')
    expect(ids.slice(-5)).toEqual(['s30', 's31', 's32', 's33', 's34'])
    // The listing read no log: a header and tail of each changed one.
    expect(reads.logs - logs).toBe(0)
    const otters = await query.searchEvents({ text: 'otter', limit: 100 })
    expect(otters.hits.map((h) => `${h.id}#${h.seq}`).sort()).toEqual(['s2#1', 's30#0', 's31#0', 's32#0', 's33#0', 's34#0'])
    // A search read only the changed logs (the deleted one is gone, the appended one read from its last indexed event).
    expect(reads.logs - logs).toBe(6)
    expect((await query.searchSessions({ text: 'heron 7' })).hits).toEqual([])
    await query.close()
    expect(files(path)).toEqual(before)
  })

  it('without a usable index lists from the logs and refuses search with SESSION_QUERY_INDEX_UNAVAILABLE, creating nothing', async () => {
    const persistence = createMemoryPersistence()
    await persist(persistence, header('a', 1), [message(0, 'heron')])
    const dir = tempDir()
    const path = join(dir, '.dsh', 'index.sqlite')
    const query = await reader(persistence, path)
    expect((await query.listSessions()).records.map((r) => r.header.id)).toEqual(['a'])
    const refused = query.searchEvents({ text: 'heron' })
    await expect(refused).rejects.toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE', details: { state: 'missing' } })
    expect(readdirSync(dir)).toEqual([])
  })

  it('past overlayLimit changes lists every header and refuses search, still writing nothing', async () => {
    const { persistence, path } = await written(10)
    for (let i = 10; i < 20; i++) await persist(persistence, header(`s${i}`, i), [message(0, `otter ${i}`)])
    const before = files(path)
    const query = await reader(persistence, path, 5)
    expect((await query.listSessions()).records).toHaveLength(20)
    expect(await code(query.searchEvents({ text: 'otter' }))).toBe('SESSION_QUERY_INDEX_UNAVAILABLE')
    expect(files(path)).toEqual(before)
  })
})

describe('rebuilds swap a new generation in', () => {
  it('a reader and a writer holding the old index notice the swap; the writer catches the new one up', async () => {
    const { persistence, path } = await written(20)
    const old = readlinkSync(path)
    const { ctx, sessions } = store()
    const writer = await createSqliteSessionQuery({ sessions, persistence, path, context: ctx, logger: silent })
    later(() => writer.close())
    const query = await reader(persistence, path)
    expect((await query.listSessions()).records).toHaveLength(20)
    let held = 0
    const report = await buildIndexFile({
      persistence,
      path,
      logger: silent,
      // Between the finished file and the swap: a session the new file does not hold, and the old index still answering.
      beforeSwap: async () => {
        await persist(persistence, header('late', 100), [message(0, 'a late otter')])
        held++
        expect((await query.listSessions()).records).toHaveLength(21)
        expect(readlinkSync(path)).toBe(old)
      },
    })
    expect(held).toBe(1)
    expect(report).toMatchObject({ rebuild: 'requested', listed: 20, read: 20 })
    expect(readlinkSync(path)).not.toBe(old)
    expect(readdirSync(dirname(path))).not.toContain(old)
    // The reader reopens at its next operation: 'late' comes from the logs until a writer indexes it.
    expect((await query.searchEvents({ text: 'otter' })).hits.map((h) => h.id)).toEqual(['late'])
    expect(await query.reconcile()).toMatchObject({ changed: 1 })
    // The writer reopens too and catches the new file up from its cursor.
    expect(await writer.reconcile()).toMatchObject({ source: 'feed', read: 1, failed: 0 })
    expect(await query.reconcile()).toMatchObject({ changed: 0 })
  })

  it('a rebuild that is cancelled or fails leaves the old index as it was and removes everything it made', async () => {
    const { persistence, path } = await written(20)
    const before = files(path)
    const cancelled = new AbortController()
    const build = buildIndexFile({
      persistence,
      path,
      signal: cancelled.signal,
      logger: silent,
      beforeSwap: async () => cancelled.abort(),
    })
    await expect(build).rejects.toThrow()
    expect(files(path)).toEqual(before)
    const failing = createMemoryPersistence()
    await persist(failing, header('a', 1))
    await expect(
      buildIndexFile({
        persistence: failing,
        path,
        logger: silent,
        beforeSwap: async () => {
          throw new Error('no space left on device')
        },
      }),
    ).rejects.toThrow()
    expect(files(path)).toEqual(before)
    const query = await reader(persistence, path)
    expect((await query.searchSessions({ text: 'heron', limit: 100 })).hits).toHaveLength(20)
  })
})
