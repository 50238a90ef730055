import { SessionId, SessionLogOffset } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import type pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { events, header, target } from './fixtures.js'

// The writer connection is shared by every session an instance writes; its
// statements must run one at a time (pg 8.23 warns when a query is queued
// behind a running one, pg 9 drops that queue). This file runs in its own
// process (vitest forks), so pg's once-per-process warning is still unsent
// when it starts.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function open(): Promise<{ pool: pg.Pool; persistence: PostgresPersistence }> {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  const persistence = await createPostgresPersistence({ pool: db.pool })
  cleanups.push(() => persistence.close())
  return { pool: db.pool, persistence }
}

/** Records the process's warnings while `work` runs (and the ticks after it, when they are emitted). */
async function warningsDuring(work: () => Promise<void>): Promise<string[]> {
  const seen: string[] = []
  const record = (warning: Error) => seen.push(`${warning.name}: ${warning.message}`)
  process.on('warning', record)
  try {
    await work()
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', record)
  }
  return seen
}

/** Appends `rounds` batches of 2 events to each session, all sessions at once, each session in order. */
async function appendConcurrently(persistence: PostgresPersistence, ids: readonly string[], rounds: number): Promise<void> {
  await Promise.all(
    ids.map(async (id) => {
      for (let round = 0; round < rounds; round++) {
        const result = await persistence.append(target(id), events(round * 2, 2, id))
        expect(result.nextSeq).toBe((round + 1) * 2)
      }
    }),
  )
}

describe('the shared writer connection', () => {
  it('runs one statement at a time: many sessions appending at once queue nothing on pg, and every batch lands', async () => {
    const { pool, persistence } = await open()
    const ids = Array.from({ length: 24 }, (_, i) => `s${i}`)
    const warnings = await warningsDuring(() => appendConcurrently(persistence, ids, 5))
    expect(warnings.filter((w) => w.includes('already executing'))).toEqual([])
    for (const id of ids) expect((await persistence.inspect(SessionId(id))).events).toEqual(events(0, 10, id))
    // Committed, as another connection sees them.
    const { rows } = await pool.query<{ n: number }>('SELECT sum(count)::int AS n FROM dsh_batches')
    expect(rows[0]!.n).toBe(ids.length * 10)
    expect(persistence.metrics.appends).toBe(ids.length * 5)
  })

  it('a materializing delete is one transaction that no other session’s append lands in; the appends all commit', async () => {
    const { pool, persistence } = await open()
    await persistence.append(target('source'), events(0, 3, 'source'))
    const seed = (await persistence.inspect(SessionId('source'))).events
    await persistence.append(
      { header: header('fork', 'source'), inheritedEventCount: SessionLogOffset(3), forkSource: SessionId('source') },
      [...seed, ...events(3, 1, 'own')],
    )
    const ids = Array.from({ length: 12 }, (_, i) => `other${i}`)
    let deleted: boolean | undefined
    const warnings = await warningsDuring(async () => {
      ;[deleted] = await Promise.all([
        persistence.delete(SessionId('source'), { materializeDependants: true }),
        appendConcurrently(persistence, ids, 3),
      ])
    })
    expect(warnings.filter((w) => w.includes('already executing'))).toEqual([])
    expect(deleted).toBe(true)
    expect((await persistence.inspect(SessionId('fork'))).events).toEqual([...seed, ...events(3, 1, 'own')])
    await expect(persistence.inspect(SessionId('source'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_NOT_FOUND' })
    for (const id of ids) expect((await persistence.inspect(SessionId(id))).events).toEqual(events(0, 6, id))
    // Every append was its own transaction: none shares the transaction id of the fork's materialized prefix.
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dsh_batches WHERE xid = (
         SELECT b.xid FROM dsh_batches b JOIN dsh_sessions s USING (sid) WHERE s.id = convert_to('fork', 'UTF8') AND b.first_seq = 0)`,
    )
    expect(rows[0]!.n).toBe(1)
  })
})
