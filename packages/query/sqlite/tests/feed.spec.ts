import { readlinkSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { createMemoryPersistence, MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { header, message, openQuery, persist, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

describe('reconciling through the change feed', () => {
  it('a search cursor survives reopening the index when nothing changed', async () => {
    const persistence = createMemoryPersistence()
    for (let i = 0; i < 12; i++) await persist(persistence, header(`s${i}`, i), [message(0, `otter number ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    const page = await first.query.searchEvents({ text: 'otter', limit: 5 })
    expect(page.nextCursor).toBeDefined()
    await first.query.close()
    // A later command (a new query over the same file) continues the search.
    const second = await openQuery({ sessions: store().sessions, persistence, path })
    expect(await second.query.reconcile()).toMatchObject({ read: 0, removed: 0 })
    const next = await second.query.searchEvents({ text: 'otter', limit: 5, cursor: page.nextCursor! })
    expect(next.hits).toHaveLength(5)
    expect(next.hits.map((h) => h.id)).not.toContain(page.hits[0]!.id)
    // A header-only change (no text moved) keeps it valid too; new text does not.
    await persist(persistence, header('quiet', 100))
    await second.query.reconcile()
    expect((await second.query.searchEvents({ text: 'otter', limit: 5, cursor: page.nextCursor! })).hits).toEqual(next.hits)
    await persist(persistence, header('loud', 101), [message(0, 'one more otter')])
    await second.query.reconcile()
    await expect(second.query.searchEvents({ text: 'otter', limit: 5, cursor: page.nextCursor! })).rejects.toMatchObject({
      code: 'SESSION_QUERY_STALE_CURSOR',
    })
  })

  it('an appended session is read from its last indexed event; a re-created one is read whole', async () => {
    const storage = new MemoryPersistenceStorage()
    const persistence = createMemoryPersistence({ storage })
    await persist(persistence, header('a', 1), [message(0, 'alpha heron'), message(1, 'alpha kestrel')])
    await persist(persistence, header('b', 2), [message(0, 'bravo heron')])
    const { query } = await openQuery({ sessions: store().sessions, persistence, path: join(tempDir(), 'q.sqlite') })

    await persistence.append({ header: header('a', 1), inheritedEventCount: 0 as never }, [message(2, 'alpha puffin')])
    expect(await query.reconcile()).toMatchObject({ read: 1, readWhole: 0 })
    expect((await query.searchEvents({ text: 'alpha' })).hits.map((h) => h.seq).sort()).toEqual([0, 1, 2])

    // Same id, same header, other events: the digest of the last indexed event gives it away.
    await persistence.delete('b' as never)
    await persist(persistence, header('b', 2), [message(0, 'bravo swift'), message(1, 'bravo wren')])
    expect(await query.reconcile()).toMatchObject({ read: 1, readWhole: 1 })
    expect((await query.searchEvents({ text: 'heron' })).hits.map((h) => h.id)).toEqual(['a'])
    expect((await query.searchEvents({ text: 'bravo' })).hits.map((h) => h.seq).sort()).toEqual([0, 1])
  })

  it('a reconciliation cancelled after the feed cursor moved loses nothing: the next process reads the rest', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    const N = 300
    for (let i = 0; i < N; i++) await persist(persistence, header(`s${i}`, i), [message(0, `first ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    for (let i = 0; i < N; i++)
      await persistence.append({ header: header(`s${i}`, i), inheritedEventCount: 0 as never }, [message(1, `appended zebra ${i}`)])
    const controller = new AbortController()
    const before = counted.logs
    const pending = first.query.reconcile(controller.signal)
    while (counted.logs - before < 100) await new Promise((resolve) => setImmediate(resolve))
    controller.abort()
    await expect(pending).rejects.toMatchObject({ code: 'CANCELLED' })
    const readFirst = counted.logs - before
    expect(readFirst).toBeLessThan(N)
    await first.query.close()
    // The feed has nothing new for the next process, but the ids it named are still pending in the index.
    const second = await openQuery({ sessions: store().sessions, persistence, path })
    expect(counted.logs - before).toBeGreaterThanOrEqual(N)
    expect(await second.query.reconcile()).toMatchObject({ source: 'feed', changed: 0, read: 0 })
    const hits = await second.query.searchSessions({ text: 'zebra', limit: 100 })
    let count = hits.hits.length
    let cursor = hits.nextCursor
    while (cursor !== undefined) {
      const page = await second.query.searchSessions({ text: 'zebra', limit: 100, cursor })
      count += page.hits.length
      cursor = page.nextCursor
    }
    expect(count).toBe(N)
  })

  it('creates the index private: file, WAL and shared memory 0600, its directory 0700', async () => {
    const persistence = createMemoryPersistence()
    await persist(persistence, header('a', 1), [message(0, 'secret words')])
    const dir = join(tempDir(), 'root', '.dsh')
    const path = join(dir, 'index.sqlite')
    const { query } = await openQuery({ sessions: store().sessions, persistence, path })
    await query.searchEvents({ text: 'secret' })
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    // The path links to the generation file beside it, whose WAL companions carry its name.
    const generation = join(dir, readlinkSync(path))
    for (const file of [generation, `${generation}-wal`, `${generation}-shm`]) expect(statSync(file).mode & 0o777).toBe(0o600)
  })
})
