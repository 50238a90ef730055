import { SessionId } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { outageCluster } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { FeedPruner } from '../src/feed-pruning.js'
import { applyMigrations } from '../src/migrations.js'
import { migrate, SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '../src/schema.js'
import { events, target } from './fixtures.js'

// The change feed pruned behind a horizon (src/feed-pruning.ts). The file
// has a cluster of its own: one test stops the server.
const outage = outageCluster()
const cleanups: Array<() => unknown> = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function database(): Promise<{ url: string; pool: pg.Pool }> {
  const url = await outage.cluster().createDatabase()
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  cleanups.push(() => pool.end().catch(() => {}))
  return { url, pool }
}

async function open(pool: pg.Pool, options: { feedLimit?: number; readOnly?: boolean } = {}): Promise<PostgresPersistence> {
  const p = await createPostgresPersistence({ pool, ...options })
  cleanups.push(() => p.close())
  return p
}

async function rows(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dsh_changes')
  return rows[0]!.n
}

const sorted = (ids: Iterable<string>): string[] => [...ids].sort()

describe('dsh_changes is pruned behind a horizon', () => {
  it('800 writes over 120 ids (creates, appends, deletes) with feedLimit 20: the table never holds more than 2 × (limit + 1) rows', async () => {
    const { pool } = await database()
    const limit = 20
    const p = await open(pool, { feedLimit: limit })
    // The bound (README, "Change feed bound"): 2 × (limit + W), one writer here.
    const bound = 2 * (limit + 1)
    let largest = 0
    let rowWrites = 0
    const next = new Map<string, number>()
    for (let i = 0; i < 800; i++) {
      const id = `s${(i * 7919) % 120}`
      const at = next.get(id)
      if (at === undefined) {
        await p.append(target(id), events(0, 1))
        next.set(id, 1)
        rowWrites++
      } else if (i % 3 === 0) {
        expect(await p.delete(SessionId(id))).toBe(true)
        next.delete(id)
        rowWrites++
      } else {
        // An append to a stored session is its own change record (its batch row): no dsh_changes row.
        await p.append(target(id), events(at, 1))
        next.set(id, at + 1)
      }
      await p.feedIdle()
      largest = Math.max(largest, await rows(pool))
    }
    expect(largest).toBeLessThanOrEqual(bound)
    expect(rowWrites).toBeGreaterThan(10 * limit)
    // Every `limit + 1` rows written since the last pruning prune again.
    expect(p.metrics.feedPrunes).toBe(Math.floor(rowWrites / (limit + 1)))
    console.log(
      `800 writes (${rowWrites} of them dsh_changes rows), feedLimit ${limit}: largest dsh_changes ${largest} rows (bound ${bound}), ${p.metrics.feedPrunes} prunings`,
    )
    // Bounded by counts (16 prunings); the timeout only guards a hang.
  }, 600_000)

  it('a follower polling at least once per pruning is answered exactly, never with a rescan; one left behind resyncs exactly once, counted', async () => {
    const { pool } = await database()
    const limit = 10
    const writer = await open(pool, { feedLimit: limit })
    const reader = await open(pool, { readOnly: true })
    const first = await reader.changes()
    expect(first).toMatchObject({ rescan: true, rescanReason: 'no-cursor' })
    const lagging = first.cursor
    let cursor = first.cursor
    let changed = new Set<string>()
    const live = new Set<string>()
    for (let i = 0; i < 240; i++) {
      const id = `f${(i * 31) % 45}`
      if (live.has(id)) {
        await writer.delete(SessionId(id))
        live.delete(id)
      } else {
        await writer.append(target(id), events(0, 1))
        live.add(id)
      }
      changed.add(id)
      if (i % 10 === 9) {
        await writer.feedIdle()
        const result = await reader.changes(cursor)
        expect(result.rescan).toBe(false)
        // Ids may repeat across reads (a cursor is a snapshot's xmin), never go missing.
        for (const id of changed) expect(result.ids).toContain(id)
        cursor = result.cursor
        changed = new Set()
      }
    }
    expect(writer.metrics.feedPrunes).toBeGreaterThan(10)
    expect(reader.metrics).toMatchObject({ rescans: 1, horizonRescans: 0 })
    // The follower that never read since its first cursor: the typed resync, once.
    const behind = await reader.changes(lagging)
    expect(behind).toMatchObject({ ids: [], rescan: true, rescanReason: 'behind-horizon' })
    expect(reader.metrics).toMatchObject({ rescans: 2, horizonRescans: 1 })
    const listed = new Set((await reader.list()).map((r) => r.header.id as string))
    expect(sorted(listed)).toEqual(sorted(live))
    // Then it follows exactly from the resync's cursor.
    await writer.append(target('after'), events(0, 1))
    const next = await reader.changes(behind.cursor)
    expect(next).toMatchObject({ ids: ['after'], rescan: false })
    expect(reader.metrics).toMatchObject({ rescans: 2, horizonRescans: 1 })
    // Bounded by counts (21 prunings); the timeout only guards a hang.
  }, 600_000)

  it('a database at schema 2 migrates forward: its cursors stay valid, and its rows become the first pruning summary and go with the next', async () => {
    const { pool } = await database()
    await applyMigrations(pool, SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 2))
    await pool.query("INSERT INTO dsh_changes (id) SELECT convert_to('old' || n, 'UTF8') FROM generate_series(1, 300) n")
    const { rows: cursorRows } = await pool.query<{ cursor: string }>(
      "SELECT feed_id || ':' || pg_snapshot_xmin(pg_current_snapshot())::text AS cursor FROM dsh_feed",
    )
    const old = cursorRows[0]!.cursor
    // Opening with migrate: false refuses the older schema, naming dsh migrate.
    await expect(createPostgresPersistence({ pool, migrate: false })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      message: expect.stringContaining('dsh migrate'),
    })
    expect(await migrate(pool)).toEqual({ component: SESSIONS_COMPONENT, from: 2, to: SESSION_MIGRATIONS.length })
    const p = await open(pool, { feedLimit: 100 })
    await p.append(target('new'), events(0, 1))
    expect(await p.changes(old)).toMatchObject({ ids: ['new'], rescan: false })
    await p.feedIdle()
    expect(p.metrics.feedPrunes).toBe(1)
    // The first pruning sets the base; the old rows, one per session, are its summary.
    expect(await rows(pool)).toBe(301)
    // The next pruning moves the horizon to that base: the old rows go, and the old cursor is behind it.
    for (let i = 0; p.metrics.feedPrunes < 2; i++) {
      await p.append(target(`new-${i}`), events(0, 1))
      await p.feedIdle()
    }
    const { rows: left } = await pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM dsh_changes WHERE convert_from(id, 'UTF8') LIKE 'old%'",
    )
    expect(left[0]!.n).toBe(0)
    expect(await rows(pool)).toBeLessThanOrEqual(2 * (100 + 1))
    expect(await p.changes(old)).toMatchObject({ rescan: true, rescanReason: 'behind-horizon' })
  })

  it('a bad feedLimit is refused', async () => {
    const { pool } = await database()
    for (const bad of [0, -1, 1.5, Number.NaN])
      await expect(createPostgresPersistence({ pool, feedLimit: bad })).rejects.toMatchObject({
        code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      })
  })

  it('through an outage a pruning check fails quietly (counted, no unhandled rejection), reads fail typed, and pruning resumes after it', async () => {
    const { pool } = await database()
    const p = await open(pool, { feedLimit: 5 })
    for (let i = 0; i < 5; i++) await p.append(target(`o${i}`), events(0, 1))
    await p.feedIdle()
    const { cursor } = await p.changes()
    await outage.cluster().stopServer()
    await expect(p.append(target('during'), events(0, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
    await expect(p.changes(cursor)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
    // A check that runs while the server is away (a change committed just before it went).
    let prunings = 0
    const pruner = new FeedPruner(pool, 5, () => prunings++)
    pruner.changed()
    pruner.changed()
    await pruner.idle()
    expect({ failures: pruner.failures, prunings }).toEqual({ failures: 2, prunings: 0 })
    await outage.cluster().startServer()
    // The server is back: the next materialization checks again and prunes.
    let created = 0
    for (let i = 0; p.metrics.feedPrunes === 0 && i < 200; i++) {
      try {
        await p.append(target(`back${i}`), events(0, 1))
        created++
      } catch (error) {
        expect(error).toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
      }
      await p.feedIdle()
    }
    expect(created).toBeGreaterThan(0)
    expect(p.metrics.feedPrunes).toBeGreaterThan(0)
    expect((await p.changes(cursor)).rescan).toBe(false)
    await pruner.close()
    expect(outage.rejections).toEqual([])
  })
})
