import { join } from 'node:path'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { code, header, message, openQuery, persist, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

describe('incremental reconciliation', () => {
  it('after appending to 10 of 10,000 sessions, reads only those 10 bodies', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    const N = 10_000
    const name = (i: number): string => `s${String(i).padStart(5, '0')}`
    const headers = Array.from({ length: N }, (_, i) =>
      header(name(i), 1000 + i, i % 100 === 0 ? {} : { parentSession: name(i - (i % 100)), origin: 'subagent', delegationDepth: 1 }),
    )
    for (const [i, h] of headers.entries()) await persist(persistence, h, [message(0, `first words of session ${i}`)])
    const { sessions } = store()
    const { query, progress } = await openQuery({ sessions, persistence, path: join(tempDir(), 'query.sqlite') })
    // The first build reads every log once.
    expect(counted.logs).toBe(N)
    expect(progress[0]).toMatchObject({ phase: 'scan', rebuild: 'missing' })
    expect(progress.at(-1)).toEqual({ phase: 'index', done: N, total: N, rebuild: 'missing' })

    const changed = Array.from({ length: 10 }, (_, k) => headers[k * 997]!)
    for (const h of changed) await persist(persistence, h, [message(1, `zebra appended to ${h.id}`)])
    const before = counted.logs
    const headerReadsBefore = persistence.metrics.headerReads
    const report = await query.reconcile()
    expect(counted.logs - before).toBe(10)
    // The change feed named the 10: no listing, no header of the other 9,990 read.
    expect(report).toMatchObject({ source: 'feed', listed: 0, changed: 10, read: 10, readWhole: 0, removed: 0, corrupt: 0, failed: 0 })
    expect(report).not.toHaveProperty('rebuild')
    expect(persistence.metrics.headerReads - headerReadsBefore).toBeLessThanOrEqual(10)

    const hits = await query.searchEvents({ text: 'zebra', limit: 100 })
    expect(hits.hits.map((h) => h.id).sort()).toEqual(changed.map((h) => h.id).sort())
    expect(hits.hits.every((h) => h.seq === 1)).toBe(true)
    const page = await query.listSessions({ createdAt: { from: 1000, to: 1000 + N } })
    const revisions = new Map(page.records.map((r) => [r.header.id, r.revision]))
    for (const h of changed) expect(revisions.get(h.id)).toBe(await persistence.stat(h.id))

    // Nothing changed: nothing is read.
    const again = await query.reconcile()
    expect(again.read).toBe(0)
    expect(counted.logs - before).toBe(10)
  })

  it('reopening over 10,000 unchanged sessions reads no log and no header', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    const N = 10_000
    for (let i = 0; i < N; i++) await persist(persistence, header(`s${i}`, i), [message(0, `words of session ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    await first.query.close()
    const headerReads = persistence.metrics.headerReads
    const bodyReads = counted.logs
    const { query, progress } = await openQuery({ sessions: store().sessions, persistence, path })
    expect(persistence.metrics.headerReads).toBe(headerReads)
    expect(counted.logs).toBe(bodyReads)
    expect(progress.at(-1)).toEqual({ phase: 'index', done: 0, total: 0 })
    expect(await query.reconcile()).toMatchObject({ source: 'feed', listed: 0, changed: 0, read: 0 })
    // And the listing answers from the index alone.
    expect((await query.listSessions({ limit: 50 })).records).toHaveLength(50)
    expect(persistence.metrics.headerReads).toBe(headerReads)
    expect(counted.logs).toBe(bodyReads)
  })

  it('adds new sessions, removes deleted ones and reads only the new body', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    for (let i = 0; i < 20; i++) await persist(persistence, header(`s${i}`, i), [message(0, `text ${i}`)])
    const { sessions } = store()
    const { query } = await openQuery({ sessions, persistence, path: join(tempDir(), 'q.sqlite') })
    await persistence.delete('s3' as never)
    await persist(persistence, header('new', 100), [message(0, 'brand new quokka')])
    const before = counted.logs
    const report = await query.reconcile()
    expect(report).toMatchObject({ read: 1, removed: 1 })
    expect(counted.logs - before).toBe(1)
    const ids = (await query.listSessions()).records.map((r) => r.header.id)
    expect(ids).toHaveLength(20)
    expect(ids).not.toContain('s3')
    expect(ids.at(-1)).toBe('new')
    expect((await query.searchEvents({ text: 'quokka' })).hits.map((h) => h.id)).toEqual(['new'])
    expect((await query.searchEvents({ text: 'text 3' })).hits.map((h) => h.id)).not.toContain('s3')
  })

  it('reconciles on open against the index of an earlier run: only changed logs are read', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    for (let i = 0; i < 50; i++) await persist(persistence, header(`s${i}`, i), [message(0, `text ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    await first.query.close()
    await persist(persistence, header('s7', 7), [message(1, 'later')])
    const before = counted.logs
    const second = await openQuery({ sessions: store().sessions, persistence, path })
    expect(counted.logs - before).toBe(1)
    expect(second.progress.every((p) => p.rebuild === undefined)).toBe(true)
    expect(second.progress.at(-1)).toEqual({ phase: 'index', done: 1, total: 1 })
  })

  it('is cancellable; a cancelled reconciliation keeps its progress and the next one resumes', async () => {
    const { persistence, reads: counted } = countReads(createMemoryPersistence())
    for (let i = 0; i < 600; i++) await persist(persistence, header(`s${i}`, i), [message(0, `text ${i}`)])
    const path = join(tempDir(), 'q.sqlite')
    const { sessions } = store()
    expect(await code(openQuery({ sessions, persistence, path, signal: AbortSignal.abort() }))).toBe('CANCELLED')
    const { query } = await openQuery({ sessions, persistence, path, reconcileOnOpen: false })
    expect(await code(query.reconcile(AbortSignal.abort()))).toBe('CANCELLED')
    const controller = new AbortController()
    const pending = query.reconcile(controller.signal)
    // Let a few reads land, then abort in the middle.
    while (counted.logs < 200) await new Promise((r) => setImmediate(r))
    controller.abort()
    expect(await code(pending)).toBe('CANCELLED')
    const readBefore = counted.logs
    expect(readBefore).toBeLessThan(600)
    const report = await query.reconcile()
    expect(report.read).toBeLessThan(600)
    expect(report.read + readBefore).toBeGreaterThanOrEqual(600)
    expect((await query.listSessions()).records).toHaveLength(600)
    expect((await query.searchSessions({ text: 'text', limit: 100 })).hits).toHaveLength(100)
  })
})
