import { SessionId } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import type pg from 'pg'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ChangeAnnouncer } from '../src/announcer.js'
import { events, target } from './fixtures.js'

// What an append costs in statements, counted on the client side of the
// connections (the statements the pool's clients are asked to run), never in
// time: a durable append is one statement on the writer connection, and the
// notices that follow are shared by every instance over the pool.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Sent {
  readonly text: string
  readonly name: string | undefined
}

/** Records every statement sent on `pool`: through `pool.query` (`pooled`) and on checked-out clients (`checkedOut`). */
function recordStatements(pool: pg.Pool): { pooled: Sent[]; checkedOut: Sent[] } {
  const seen = { pooled: [] as Sent[], checkedOut: [] as Sent[] }
  const sent = (args: unknown[]): Sent => {
    const [first] = args
    if (typeof first === 'string') return { text: first, name: undefined }
    const config = first as { text: string; name?: string }
    return { text: config.text, name: config.name }
  }
  const poolQuery = pool.query.bind(pool) as (...args: unknown[]) => unknown
  ;(pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    seen.pooled.push(sent(args))
    return poolQuery(...args)
  }
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown
  ;(pool as unknown as { connect: (...args: unknown[]) => unknown }).connect = async (...args: unknown[]) => {
    // `pool.query` checks a client out with a callback: its statement is recorded as pooled.
    if (args.length > 0) return connect(...args)
    const client = (await connect()) as pg.PoolClient
    const clientQuery = client.query.bind(client) as (...args: unknown[]) => unknown
    ;(client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      seen.checkedOut.push(sent(args))
      return clientQuery(...args)
    }
    return client
  }
  return seen
}

async function database() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  return db
}

describe('statements per append', () => {
  it('an append to a session the instance writes is one statement on the writer connection, prepared once, on the session’s own partitions', async () => {
    // The clock stands still: after the first notice no append carries one (see the carrier cases below).
    vi.useFakeTimers({ toFake: ['Date'] })
    cleanups.push(() => vi.useRealTimers())
    const { pool } = await database()
    const persistence = await createPostgresPersistence({ pool })
    cleanups.push(() => persistence.close())
    await persistence.append(target('counted'), events(0, 2))
    const { rows } = await pool.query<{ part: string }>(
      "SELECT tableoid::regclass::text AS part FROM dsh_sessions WHERE id = convert_to('counted', 'UTF8')",
    )
    const partition = rows[0]!.part.replace('dsh_sessions_p', '')
    const seen = recordStatements(pool)
    const appends = 20
    for (let i = 0; i < appends; i++) await persistence.append(target('counted'), events(2 + i, 1))
    // The writer connection was checked out before: every one of its statements is counted by the instance's
    // own metrics and the batches stored; the pool's own statements (recorded) are the notices alone.
    expect(seen.checkedOut).toEqual([])
    expect(seen.pooled.every((s) => s.text.includes('pg_notify('))).toBe(true)
    expect(persistence.metrics.appends).toBe(1 + appends)
    expect((await persistence.inspect(SessionId('counted'))).events).toHaveLength(2 + appends)
    await persistence.close()
    // A new instance (the first gave the lease back): its writer connection is checked out while recorded.
    const second = await createPostgresPersistence({ pool, migrate: false })
    cleanups.push(() => second.close())
    await second.append(target('counted'), events(2 + appends, 1))
    const before = seen.checkedOut.length
    for (let i = 0; i < appends; i++) await second.append(target('counted'), events(3 + appends + i, 1))
    const perAppend = seen.checkedOut.slice(before)
    expect(perAppend).toHaveLength(appends)
    expect(new Set(perAppend.map((s) => s.name))).toEqual(new Set([`dsh_append_p${partition}`]))
    expect(perAppend[0]!.text).toContain(`UPDATE dsh_sessions_p${partition} `)
    expect(perAppend[0]!.text).toContain(`INSERT INTO dsh_batches_p${partition} `)
    // Opening the writer connection: the plan setting and its name, the lease and the session's row, once.
    expect(seen.checkedOut.slice(0, before).map((s) => s.text.split(/\s+/).slice(0, 2).join(' '))).toEqual([
      "SELECT set_config('plan_cache_mode',",
      'SELECT pg_try_advisory_lock($1::bigint)',
      'SELECT id_key,',
      'WITH s',
    ])
    expect((await second.inspect(SessionId('counted'))).events).toHaveLength(3 + 2 * appends)
  })

  it('a commit on a quiet pool is announced at once; commits that follow it closely, by any instance over the pool, share the next notice; each pool keeps its own', async () => {
    // The clock stands still (timers run), so every commit below follows the one before closely, however slow the machine.
    vi.useFakeTimers({ toFake: ['Date'] })
    cleanups.push(() => vi.useRealTimers())
    const notices = (seen: { pooled: { text: string }[] }): number => seen.pooled.filter((s) => s.text.includes('pg_notify(')).length
    const one = await database()
    const seen = recordStatements(one.pool)
    const a = new ChangeAnnouncer(one.pool)
    const b = new ChangeAnnouncer(one.pool)
    a.announce()
    expect(notices(seen)).toBe(1)
    b.announce()
    a.announce()
    expect(notices(seen)).toBe(1)
    await a.close()
    await b.close()
    expect(notices(seen)).toBe(2)

    const other = await database()
    const seenOther = recordStatements(other.pool)
    // Every instance over the first pool closed: a new one starts afresh. Another pool keeps its own gap.
    const c = new ChangeAnnouncer(one.pool)
    const d = new ChangeAnnouncer(other.pool)
    const e = new ChangeAnnouncer(other.pool)
    c.announce()
    d.announce()
    e.announce()
    expect(notices(seen)).toBe(3)
    expect(notices(seenOther)).toBe(1)
    await Promise.all([c.close(), d.close(), e.close()])
    expect(notices(seen)).toBe(3)
    expect(notices(seenOther)).toBe(2)
  })

  it('an append carries the pool’s notice when none is on its way and none went out for 10 ms: one statement, no notice of its own, heard by a listener', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    cleanups.push(() => vi.useRealTimers())
    const { pool } = await database()
    const listener = await pool.connect()
    cleanups.push(() => listener.release())
    await listener.query('LISTEN dsh_changes')
    const notified = () => new Promise<string>((resolve) => listener.once('notification', (n) => resolve(n.channel)))
    const persistence = await createPostgresPersistence({ pool })
    cleanups.push(() => persistence.close())
    // The create's own notice is heard first, so each wait below is for the next notice alone.
    const created = notified()
    await persistence.append(target('carried'), events(0, 1))
    await created
    const seen = recordStatements(pool)
    vi.setSystemTime(Date.now() + 1000)
    const carried = notified()
    await persistence.append(target('carried'), events(1, 1))
    // The writer connection was checked out before recording: the pool saw no statement, the notice rode on the append.
    expect(await carried).toBe('dsh_changes')
    expect(seen.pooled).toEqual([])
    // Within 10 ms of that notice (the clock stands still) the next append carries none; its commit gets a notice of its own.
    const own = notified()
    await persistence.append(target('carried'), events(2, 1))
    expect((await persistence.inspect(SessionId('carried'))).events).toHaveLength(3)
    await persistence.close()
    expect(await own).toBe('dsh_changes')
    expect(seen.pooled.filter((s) => s.text.includes('pg_notify('))).toHaveLength(1)
  })

  it('one carrier per pool at a time: a commit that finishes while it is on its way waits for it, then for the next carrier or a notice of its own; a carrier that failed owes its commits again', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    cleanups.push(() => vi.useRealTimers())
    const notices = (seen: { pooled: { text: string }[] }): number => seen.pooled.filter((s) => s.text.includes('pg_notify(')).length
    const { pool } = await database()
    const seen = recordStatements(pool)
    const a = new ChangeAnnouncer(pool)
    const b = new ChangeAnnouncer(pool)
    expect(a.carry()).toBe(true)
    // A carrier is on its way: nobody else carries, and a commit of b's sends nothing yet.
    vi.setSystemTime(Date.now() + 1000)
    expect(b.carry()).toBe(false)
    b.announce()
    expect(notices(seen)).toBe(0)
    a.carried(true)
    // b's commit may have come after the carrier's: the next carrier announces it.
    expect(b.carry()).toBe(true)
    b.carried(true)
    await b.close()
    expect(notices(seen)).toBe(0)
    // A carrier that failed (its notice maybe never sent) owes its commits again: a notice of its own follows.
    vi.setSystemTime(Date.now() + 1000)
    expect(a.carry()).toBe(true)
    a.carried(false)
    await a.close()
    expect(notices(seen)).toBe(1)
    // A closed instance carries nothing.
    expect(a.carry()).toBe(false)
  })

  it('the notice reaches a listener on the change channel', async () => {
    const { pool } = await database()
    const listener = await pool.connect()
    cleanups.push(() => listener.release())
    await listener.query('LISTEN dsh_changes')
    const heard = new Promise<string>((resolve) => listener.once('notification', (n) => resolve(n.channel)))
    const announcer = new ChangeAnnouncer(pool)
    announcer.announce()
    await announcer.close()
    expect(await heard).toBe('dsh_changes')
  })
})
