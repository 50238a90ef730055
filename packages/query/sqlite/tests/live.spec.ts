import { join } from 'node:path'
import { Context } from '@dsh/context'
import { type SessionStore, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { type SqliteSessionQuery, sqliteSessionQueryPlugin } from '../src/index.js'
import { code, header, later, message, persist, silent, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

/** A composed host: store, persistence (coordinator + shared reads) and the sqlite query. */
async function host(
  backend: SessionPersistence,
  path: string,
  indexDelayMs?: number,
): Promise<{ ctx: Context; sessions: SessionStore; persistence: SessionPersistence; query: SqliteSessionQuery }> {
  const ctx = new Context({ logger: silent })
  later(() => ctx.dispose())
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(backend, { writeBehindMs: 1 }))
  await ctx.activate(sqliteSessionQueryPlugin({ path, ...(indexDelayMs === undefined ? {} : { indexDelayMs }) }))
  return {
    ctx,
    sessions: ctx.require('sessions'),
    persistence: ctx.require('sessionPersistence'),
    query: ctx.require('sessionQuery') as SqliteSessionQuery,
  }
}

let seed = 7
/** Deterministic letters that zstd cannot shrink much. */
function noise(length: number): string {
  let out = ''
  while (out.length < length) {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
    out += seed.toString(36)
  }
  return out.slice(0, length)
}

describe('sessions of this process', () => {
  it('follows sessions going cold without reading their bodies to list them', async () => {
    const { persistence: backend, reads: counted } = countReads(createMemoryPersistence())
    await persist(backend, header('parent', 1), [message(0, 'old parent')])
    // The writer's own passes wait past the test (indexDelayMs), so the steps run in the order written: the search before the writer indexes, then the writer's pass.
    const { sessions, persistence, query } = await host(backend, join(tempDir(), 'q.sqlite'), 600_000)
    const child = sessions.create({ id: 'child', createdAt: 5, parentSession: 'parent', origin: 'subagent', delegationDepth: 1 })
    child.append('user/message', { text: 'a child talks about herons' })
    await sessions.flush(child)
    const reads = counted.logs
    let [record] = (await query.listSessions({ parentSession: 'parent', origin: 'subagent' })).records
    expect(record).toMatchObject({ live: true, persisted: true, revision: await persistence.stat(child.id) })

    child.append('assistant/message', { turn: 1, text: 'herons again' })
    await sessions.dispose('child')
    ;[record] = (await query.listSessions({ parentSession: 'parent', origin: 'subagent' })).records
    expect(record).toMatchObject({ live: false, persisted: true, revision: await persistence.stat(child.id), header: child.header })
    expect(counted.logs).toBe(reads)

    // Its text comes from memory too: a search before the writer indexed it, and the writer indexing it.
    const hits = await query.searchEvents({ text: 'herons' })
    expect(hits.hits.map((h) => `${h.id}#${h.seq}`).sort()).toEqual(['child#0', 'child#1'])
    // The writer indexing it takes its text from memory too.
    expect(await query.reconcile()).toMatchObject({ read: 0 })
    expect((await query.searchSessions({ text: 'herons' })).hits.map((h) => h.record)).toEqual([
      expect.objectContaining({ live: false, persisted: true }),
    ])
    expect(counted.logs).toBe(reads)
  })

  it("a writer's sessions that went cold cost the next process a suffix read each, never a whole body", async () => {
    const { createJsonlPersistence } = await import('@dsh/session-persistence-jsonl')
    const { readdirSync, statSync } = await import('node:fs')
    const root = tempDir()
    const path = join(root, '.dsh', 'index.sqlite')
    // Process 1: a writer with the index, whose sessions go cold without any search verifying them.
    const writer = await host(createJsonlPersistence({ root }), path)
    for (let s = 0; s < 20; s++) {
      const session = writer.sessions.create({ id: `w${s}`, createdAt: s })
      for (let batch = 0; batch < 20; batch++) {
        // Text that does not compress away, so the logs are large next to one batch (~3 KiB).
        for (let k = 0; k < 5; k++) session.append('user/message', { text: `batch ${batch} line ${k} of session ${s} ${noise(600)}` })
        await writer.sessions.flush(session)
      }
      await writer.sessions.dispose(session.id)
    }
    await writer.query.listSessions()
    await writer.ctx.dispose()
    const logBytes = readdirSync(root)
      .filter((name) => name.startsWith('w'))
      .reduce((sum, name) => sum + readdirSync(join(root, name)).reduce((n, file) => n + statSync(join(root, name, file)).size, 0), 0)

    // Process 2: the next command over the same root and index.
    const persistence = createJsonlPersistence({ root, readOnly: true })
    later(() => persistence.close())
    const { openQuery } = await import('./helpers.js')
    const { query } = await openQuery({ sessions: store().sessions, persistence, path, reconcileOnOpen: false })
    const journal = statSync(join(root, 'changes.journal')).size
    const before = persistence.metrics.bytesRead
    const report = await query.reconcile()
    expect(report).toMatchObject({ source: 'feed', readWhole: 0, corrupt: 0, failed: 0 })
    expect(report.read).toBeLessThanOrEqual(20)
    // The writer left their text: the next process reads the change journal and, per log, its header unit and
    // one suffix (from the last indexed event on) — a small part of the logs, never a whole body.
    expect(persistence.metrics.bodyReads).toBe(0)
    expect(persistence.metrics.bytesRead - before - journal).toBeLessThan(logBytes / 4)
    const hits = await query.searchSessions({ text: 'batch line', limit: 100 })
    expect(hits.hits.map((h) => [h.record.header.id, h.matches]).sort()).toEqual(
      Array.from({ length: 20 }, (_, s) => [`w${s}`, 100]).sort(),
    )
  })

  it('drops a session that went cold without ever being persisted', async () => {
    const { sessions } = store()
    const backend = createMemoryPersistence()
    await persist(backend, header('kept', 1))
    const { openQuery } = await import('./helpers.js')
    const { query } = await openQuery({ sessions, persistence: backend, path: join(tempDir(), 'q.sqlite') })
    const ghost = sessions.create({ id: 'ghost', createdAt: 2 })
    ghost.append('user/message', { text: 'unsaved ghost words' })
    expect((await query.listSessions()).records.map((r) => [r.header.id, r.live])).toEqual([
      ['kept', false],
      ['ghost', true],
    ])
    expect((await query.searchEvents({ text: 'ghost' })).hits).toHaveLength(1)
    await sessions.dispose('ghost')
    expect((await query.listSessions()).records.map((r) => r.header.id)).toEqual(['kept'])
    expect((await query.searchEvents({ text: 'ghost' })).hits).toEqual([])
    expect(await code(query.observeSession('ghost'))).toBe('SESSION_QUERY_NOT_FOUND')
  })

  it('notices a session that was live when the index opened and went cold before the first query', async () => {
    const { sessions } = store()
    const { persistence: backend, reads: counted } = countReads(createMemoryPersistence())
    const late = sessions.create({ id: 'late', createdAt: 3 })
    late.append('user/message', { text: 'written after the index opened' })
    const { openQuery } = await import('./helpers.js')
    const { query } = await openQuery({ sessions, persistence: backend, path: join(tempDir(), 'q.sqlite') })
    // Persisted by someone else (no coordinator here), then taken out of the store.
    await persist(backend, late.header, late.events)
    await sessions.dispose('late')
    const reads = counted.logs
    expect((await query.listSessions()).records).toEqual([
      expect.objectContaining({ header: late.header, live: false, persisted: true, revision: await backend.stat(late.id) }),
    ])
    expect(counted.logs).toBe(reads)
  })

  it('reuses the persistence LRU for repeated observations of a cold session', async () => {
    const { persistence: backend, reads: counted } = countReads(createMemoryPersistence())
    await persist(backend, header('cold', 1), [message(0, 'x'), message(1, 'y')])
    const { query } = await host(backend, join(tempDir(), 'q.sqlite'))
    const reads = counted.logs
    const first = await query.observeSession('cold')
    // At most one physical read (the index's own reconciliation may already have warmed the LRU)…
    expect(counted.logs - reads).toBeLessThanOrEqual(1)
    const afterFirst = counted.logs
    const second = await query.readHistory('cold', { limit: 1 })
    expect(second.events).toEqual([first.events[1]])
    // …and none for the next observation of the same revision.
    expect(counted.logs).toBe(afterFirst)
  })

  it('marks a corrupt log once (not re-read at the same revision), keeps it listed, and keeps searching the others', async () => {
    const { createJsonlPersistence } = await import('@dsh/session-persistence-jsonl')
    const { readFileSync, writeFileSync } = await import('node:fs')
    const root = tempDir()
    const backend = createJsonlPersistence({ root })
    later(() => backend.close())
    await persist(backend, header('good', 1), [message(0, 'searchable heron')])
    await persist(backend, header('bad', 2), [message(0, 'hidden heron')])
    await persist(backend, header('bad', 2), [message(1, 'more')])
    const file = backend.logPath('bad')
    const bytes = readFileSync(file)
    bytes[bytes.length - 1]! ^= 0xff
    writeFileSync(file, bytes)
    const { openQuery } = await import('./helpers.js')
    const { query } = await openQuery({ sessions: store().sessions, persistence: backend, path: join(root, '.index', 'query.sqlite') })
    expect(await query.reconcile()).toMatchObject({ read: 0, corrupt: 0 })
    expect(await query.rebuild()).toMatchObject({ read: 2, corrupt: 1, failed: 0 })
    expect((await query.listSessions()).records.map((r) => r.header.id)).toEqual(['good', 'bad'])
    expect((await query.searchEvents({ text: 'heron' })).hits.map((h) => h.id)).toEqual(['good'])
    expect(await code(query.observeSession('bad'))).toBe('SESSION_QUERY_CORRUPT_SESSION')
  })
})
