import { writeFileSync } from 'node:fs'
import type { Context } from '@dsh/context'
import { type SessionHeader, SessionId, SessionLogOffset } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { FORGET_EVERY_COLD } from '../src/backend.js'
import { CheckpointReader, projectionCachePath, sessionProjectionCachePlugin } from '../src/index.js'
import { appendTurn, cacheTestHost, testKeys } from '../src/testing.js'

// The rows of a session deleted from the store go on the cache's own writer
// path (its scheduler's forgetting passes over persistence's change feed:
// when it starts, every FORGET_EVERY_COLD sessions gone cold, when it
// closes), never on a read. Real JSONL roots, real cache files, rows counted in the file.

const KEYS = [testKeys.messages, testKeys.turns]
const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function freshRoot(): string {
  const { dir, cleanup } = tempDir('dsh-cache-forget-')
  cleanups.push(cleanup)
  return dir
}

/** A host on `root`: the store, JSONL persistence, the registry, then the SQLite cache (after persistence, as hosts compose it). */
async function host(root: string, options: { readOnly?: boolean; idPrefix?: string } = {}) {
  const readOnly = options.readOnly === true
  let persistence: JsonlPersistence | undefined
  const h = await cacheTestHost({
    idPrefix: options.idPrefix ?? 's',
    throttle: { events: Infinity, ms: Infinity },
    before: async (ctx: Context) => {
      persistence = createJsonlPersistence({ root, ...(readOnly ? { readOnly } : {}) })
      await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
    },
    activate: (ctx, throttle) =>
      ctx.activate(
        sessionProjectionCachePlugin({ root, ...(throttle === undefined ? {} : { throttle }), ...(readOnly ? { readOnly } : {}) }),
      ),
  })
  let disposed = false
  const dispose = async () => {
    if (disposed) return
    disposed = true
    await h.ctx.dispose()
  }
  cleanups.push(dispose)
  return { ...h, persistence: persistence!, dispose }
}

/** Rows stored in the cache file for each of `ids` (a read-only connection of its own). */
function rowsOf(root: string, ids: readonly string[]): number[] {
  const db = new Database(projectionCachePath(root), { readonly: true, fileMustExist: true })
  try {
    const count = db.prepare<[string], number>('SELECT count(*) FROM checkpoint_rows WHERE session_id = ?').pluck()
    return ids.map((id) => count.get(id)!)
  } finally {
    db.close()
  }
}

/** `count` sessions with one turn each, gone cold (each written at its turn/end and when it went cold). */
async function coldSessions(h: Awaited<ReturnType<typeof host>>, count: number): Promise<SessionHeader[]> {
  const headers: SessionHeader[] = []
  for (let i = 0; i < count; i++) {
    const session = h.sessions.create()
    appendTurn(session, 1, `turn of ${session.id}`)
    headers.push(session.header)
    await h.sessions.dispose(session.id)
  }
  await h.cache.idle()
  return headers
}

async function deleteAll(persistence: { delete(id: SessionId): Promise<boolean> }, headers: readonly SessionHeader[]): Promise<void> {
  for (const header of headers) expect(await persistence.delete(SessionId(header.id))).toBe(true)
}

describe('the rows of deleted sessions', () => {
  it('are deleted when the writer that deleted them closes; until then lookups, a reader and a read-only host delete nothing', async () => {
    const root = freshRoot()
    const writer = await host(root)
    const headers = await coldSessions(writer, 6)
    const deleted = headers.filter((_, i) => i % 2 === 0)
    const kept = headers.filter((_, i) => i % 2 === 1)
    const ids = (list: readonly SessionHeader[]) => list.map((h) => h.id)
    expect(rowsOf(root, ids(headers))).toEqual([2, 2, 2, 2, 2, 2])
    await deleteAll(writer.persistence, deleted)

    // Reads alone: the writer's own lookups, a CheckpointReader, and a whole read-only host.
    for (const header of deleted) expect(writer.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    const reader = new CheckpointReader(projectionCachePath(root))
    for (const header of deleted) expect(reader.state(header, 0, testKeys.turns, 2)).toEqual({ ended: 1 })
    reader.close()
    const readOnly = await host(root, { readOnly: true, idPrefix: 'r' })
    for (const header of deleted) expect(readOnly.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
    await readOnly.cache.idle()
    await readOnly.dispose()
    expect(readOnly.cache.metrics.forgotten).toBe(0)
    expect(writer.cache.metrics.forgotten).toBe(0)
    expect(rowsOf(root, ids(deleted))).toEqual([2, 2, 2])

    // The writer's close: its last forgetting pass.
    await writer.dispose()
    expect(writer.cache.metrics.forgotten).toBe(3)
    expect(rowsOf(root, ids(deleted))).toEqual([0, 0, 0])
    expect(rowsOf(root, ids(kept))).toEqual([2, 2, 2])
    expect(writer.warnings).toEqual([])
  })

  it('are deleted by the first pass of a writer opened after another process deleted them, from the feed (no rescan)', async () => {
    const root = freshRoot()
    const first = await host(root)
    const headers = await coldSessions(first, 5)
    await first.dispose()
    // Another process without a cache deletes two sessions.
    const bare = createJsonlPersistence({ root })
    await deleteAll(bare, headers.slice(0, 2))
    await bare.close()
    expect(
      rowsOf(
        root,
        headers.map((h) => h.id),
      ),
    ).toEqual([2, 2, 2, 2, 2])

    const next = await host(root, { idPrefix: 'n' })
    await next.cache.idle()
    expect(next.cache.metrics.forgotten).toBe(2)
    expect(next.persistence.metrics.rescans).toBe(0)
    expect(
      rowsOf(
        root,
        headers.map((h) => h.id),
      ),
    ).toEqual([0, 0, 2, 2, 2])
    // The survivors still hit.
    for (const header of headers.slice(2)) expect(next.cache.cachedSnapshot(header, SessionLogOffset(0), KEYS)).toBeDefined()
  })

  it(`are deleted by a running writer once ${FORGET_EVERY_COLD} sessions went cold, without a restart`, async () => {
    const root = freshRoot()
    const h = await host(root)
    const headers = await coldSessions(h, 3)
    await deleteAll(h.persistence, headers.slice(0, 2))
    // The pass comes as the FORGET_EVERY_COLD-th session goes cold, and not before.
    for (let cold = headers.length; cold < FORGET_EVERY_COLD; cold++) {
      expect(h.cache.metrics.forgotten).toBe(0)
      await coldSessions(h, 1)
    }
    expect(h.cache.metrics.forgotten).toBe(2)
    expect(
      rowsOf(
        root,
        headers.map((x) => x.id),
      ),
    ).toEqual([0, 0, 2])
  })

  it('are found by a rescan when the feed cannot vouch (no stored cursor); a damaged log keeps its rows', async () => {
    const root = freshRoot()
    const first = await host(root)
    const headers = await coldSessions(first, 4)
    await first.dispose()
    await deleteAll(createJsonlPersistence({ root }), headers.slice(0, 1))
    // A log that is there but cannot be read: not deleted, so its rows stay.
    writeFileSync(createJsonlPersistence({ root, readOnly: true }).logPath(headers[1]!.id), 'not a log')
    const db = new Database(projectionCachePath(root))
    db.prepare('DELETE FROM feed_cursor').run()
    db.close()

    const next = await host(root, { idPrefix: 'n' })
    await next.cache.idle()
    expect(next.persistence.metrics.rescans).toBe(1)
    expect(next.cache.metrics.forgotten).toBe(1)
    expect(
      rowsOf(
        root,
        headers.map((h) => h.id),
      ),
    ).toEqual([0, 2, 2, 2])
    expect(next.warnings).toEqual([])
  })
})
