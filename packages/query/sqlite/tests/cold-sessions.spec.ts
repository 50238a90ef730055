import { mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { buildIndexFile, type SqliteSessionQuery, sqliteSessionQueryPlugin } from '../src/index.js'
import { code, later, openQuery, silent, store, tempDir } from './helpers.js'

// A writer keeps the sessions that went cold in it until a pass indexes
// them; while the index cannot be written they wait, so they are bounded
// (`coldLimit`). Past the bound the oldest are dropped and indexed later from
// their logs. The index is made unwritable for real: its directory `.dsh`
// becomes a symbolic link, which a writer refuses to write through (this
// runs as root, which file modes do not stop), and writable again by putting
// the directory back.

const LIMIT = { sessions: 4, events: 6 }

/**
 * Events of each session, in the order they go cold: four of one event fill
 * the sessions bound, then longer ones the events bound; `big` alone is over it.
 */
const SESSIONS: Array<[id: string, events: number]> = [
  ['c0', 1],
  ['c1', 1],
  ['c2', 1],
  ['c3', 1],
  ['c4', 1],
  ['c5', 2],
  ['c6', 3],
  ['big', 7],
  ['c7', 2],
  ['c8', 1],
  ['c9', 2],
]

function textOf(id: string, k: number): string {
  return `${id}word heron line${k}`
}

describe('sessions gone cold while the index cannot be written', () => {
  it('stay within coldLimit, the oldest dropped; once it can be written, every one is indexed with its text, the dropped ones from their logs', async () => {
    const base = tempDir()
    const root = join(base, 'root')
    const indexRoot = join(base, 'index-root')
    mkdirSync(indexRoot)
    const path = join(indexRoot, '.dsh', 'index.sqlite')
    const backend = createJsonlPersistence({ root })
    later(() => backend.close())
    await buildIndexFile({ persistence: backend, path, logger: silent })
    // Unwritable: `.dsh` is now a link to the directory holding the index.
    renameSync(join(indexRoot, '.dsh'), join(indexRoot, 'moved'))
    symlinkSync(join(indexRoot, 'moved'), join(indexRoot, '.dsh'))

    const warnings: string[] = []
    const ctx = new Context({ logger: silent })
    later(() => ctx.dispose())
    ctx.provide('logger', { warn: (text: string) => void warnings.push(text), error: (text: string) => void warnings.push(text) })
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(backend, { writeBehindMs: 1 }))
    // No scheduled pass within the test: the passes are the `reconcile()` calls below.
    await ctx.activate(sqliteSessionQueryPlugin({ path, indexDelayMs: 600_000, coldLimit: LIMIT }))
    const sessions = ctx.require('sessions')
    const query = ctx.require('sessionQuery') as SqliteSessionQuery

    let most = { sessions: 0, events: 0 }
    for (const [n, [id, events]] of SESSIONS.entries()) {
      const session = sessions.create({ id, createdAt: n })
      for (let k = 0; k < events; k++) session.append('user/message', { text: textOf(id, k) })
      await sessions.dispose(id)
      const { coldSessions, coldEvents } = query.metrics
      expect(coldSessions).toBeLessThanOrEqual(LIMIT.sessions)
      expect(coldEvents).toBeLessThanOrEqual(LIMIT.events)
      most = { sessions: Math.max(most.sessions, coldSessions), events: Math.max(most.events, coldEvents) }
      if (n % 4 === 3) {
        // A pass fails and keeps what it holds.
        expect(await code(query.reconcile())).toBe('SESSION_QUERY_INDEX_UNAVAILABLE')
        expect(query.metrics).toMatchObject({ coldSessions, coldEvents })
      }
    }
    expect(warnings.join('\n')).toContain('not-a-directory')
    expect(most).toEqual(LIMIT)
    // The newest that fit: c9 (2 events), c8 (1), c7 (2), not c6 (3 more); all the others were dropped (big at once).
    expect(query.metrics).toMatchObject({ coldSessions: 3, coldEvents: 5, coldDropped: SESSIONS.length - 3 })

    // Before the catch-up, a search answers every session through the overlay: dropped ones from their logs.
    const before = await query.searchSessions({ text: 'heron', limit: 100 })
    expect(before.hits.map((hit) => [hit.record.header.id, hit.matches]).sort()).toEqual([...SESSIONS].sort())

    // Writable again: the directory is put back. The next pass indexes every session: the held ones from memory, the rest from their logs.
    rmSync(join(indexRoot, '.dsh'))
    renameSync(join(indexRoot, 'moved'), join(indexRoot, '.dsh'))
    expect(await query.reconcile()).toMatchObject({
      source: 'feed',
      changed: SESSIONS.length,
      fromMemory: 3,
      read: SESSIONS.length - 3,
      failed: 0,
      corrupt: 0,
    })
    expect(query.metrics).toMatchObject({ coldSessions: 0, coldEvents: 0 })

    // A reader of the index alone (nothing behind it) lists and finds every session with its text.
    const reader = createJsonlPersistence({ root, readOnly: true })
    later(() => reader.close())
    const { query: indexed } = await openQuery({ sessions: store().sessions, persistence: reader, path, readOnly: true })
    expect(await indexed.reconcile()).toMatchObject({ source: 'feed', changed: 0 })
    expect((await indexed.listSessions({ limit: 100 })).records.map((record) => record.header.id).sort()).toEqual(
      SESSIONS.map(([id]) => id).sort(),
    )
    for (const [id, events] of SESSIONS) {
      const hits = [...(await indexed.searchEvents({ text: `${id}word`, limit: 100 })).hits].sort((a, b) => a.seq - b.seq)
      expect(hits.map((hit) => [hit.id, hit.seq])).toEqual(Array.from({ length: events }, (_, k) => [id, k]))
      expect(hits.map((hit) => hit.snippet.replace(/[[\]]/g, ''))).toEqual(Array.from({ length: events }, (_, k) => textOf(id, k)))
    }
  })
})
