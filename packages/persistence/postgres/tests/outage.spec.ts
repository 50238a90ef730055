import { hostname } from 'node:os'
import { Context } from '@dsh/context'
import { SessionId, SessionLogOffset, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { Backoff, RETRY_CAP_MS, retryDelay, subscribeChanges } from '@dsh/session-persistence-postgres/backend'
import { outageCluster, until } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { events, target } from './fixtures.js'

// A PostgreSQL outage (pg_ctl stop -m fast, then start again) on a cluster of
// this file's own: the run's shared cluster serves other files meanwhile.
const outage = outageCluster()
const rejections = outage.rejections
const cleanups: Array<() => unknown> = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function pool(url: string): Promise<pg.Pool> {
  const p = new pg.Pool({ connectionString: url, max: 4 })
  cleanups.push(() => p.end().catch(() => {}))
  return p
}

async function open(p: pg.Pool): Promise<PostgresPersistence> {
  const persistence = await createPostgresPersistence({ pool: p })
  cleanups.push(() => persistence.close())
  return persistence
}

/** Polls `attempt` until it resolves (100 ms apart, at most `tries` times) and returns its value; the last failure otherwise. */
async function eventually<T>(attempt: () => Promise<T>, tries = 600): Promise<{ value: T; failures: number }> {
  let last: unknown
  for (let failures = 0; failures < tries; failures++) {
    try {
      return { value: await attempt(), failures }
    } catch (error) {
      last = error
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  throw last
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as { code?: string; message?: string },
  )

/** The advisory locks (writer leases) held in `url`'s database, by backend pid. */
async function leases(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    return rows.map((r) => r.pid)
  } finally {
    await client.end()
  }
}

describe('a PostgreSQL outage', () => {
  it('every call during it fails SESSION_PERSISTENCE_UNAVAILABLE; after the server returns the same instance serves again, and its subscription resyncs once', async () => {
    const url = await outage.cluster().createDatabase()
    const p = await open(await pool(url))
    let notices = 0
    const subscription = await p.subscribe(() => notices++)
    cleanups.push(() => subscription.close())
    await p.append(target('a'), events(0, 2))
    await until(() => notices > 0, 'the first append was announced')

    await outage.cluster().stopServer()
    const during = await Promise.all([
      failure(p.append(target('a'), events(2, 1))),
      failure(p.inspect(SessionId('a'))),
      failure(p.inspectFrom(SessionId('a'), SessionLogOffset(1))),
      failure(p.list()),
      failure(p.stat(SessionId('a'))),
      failure(p.changes()),
      failure(p.load(SessionId('a'))),
      failure(p.delete(SessionId('a'))),
      failure(p.append(target('b'), events(0, 1))),
      failure(p.writerOf(SessionId('a'))),
    ])
    for (const error of during) {
      expect(error).toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
      expect(error?.message).toMatch(/retry once the server is back/)
    }
    // A subscription asked for during the outage does not fail: it listens once the server is back.
    let lateNotices = 0
    const late = await p.subscribe(() => lateNotices++)
    cleanups.push(() => late.close())
    // Opening a new instance needs the server: a typed refusal.
    await expect(createPostgresPersistence({ connectionString: url })).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_UNAVAILABLE' })

    const before = notices
    await outage.cluster().startServer()
    // The lost LISTEN is re-opened and the listener called once (a resync), with no write yet.
    await until(() => notices > before, 'the re-opened LISTEN called its listener')
    await until(() => lateNotices > 0, 'the subscription made during the outage listens')
    const { failures } = await eventually(() => p.append(target('a'), events(2, 1)))
    expect(failures).toBeLessThan(600)
    expect((await p.inspect(SessionId('a'))).events.map((e) => e.seq)).toEqual([0, 1, 2])
    expect((await p.list()).map((r) => r.header.id)).toEqual(['a'])
    // The re-opened LISTEN hears other hosts' commits.
    const other = await open(await pool(url))
    const heard = notices
    await other.append(target('c'), events(0, 1))
    await until(() => notices > heard, 'a commit of another host after the outage was heard')
    expect(rejections).toEqual([])
  })

  it("the writer's leases go with its connection: after the outage its next append takes the lease again, or is LOCKED if another host took it", async () => {
    const url = await outage.cluster().createDatabase()
    const a = await open(await pool(url))
    const b = await open(await pool(url))
    await a.append(target('held'), events(0, 1, 'a'))
    await a.append(target('mine'), events(0, 1, 'a'))
    await expect(b.append(target('held'), events(1, 1, 'b'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    const [holder] = await leases(url)

    await outage.cluster().stopServer()
    await expect(a.append(target('held'), events(1, 1, 'a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
    await outage.cluster().startServer()

    // The leases died with A's connection: no one holds 'mine' until A writes it again; B takes 'held' over.
    expect((await eventually(() => a.writerOf(SessionId('mine')))).value).toBeUndefined()
    await eventually(() => b.append(target('held'), events(1, 1, 'b')))
    // A never writes 'held' without its lease: LOCKED, and nothing of A's lands.
    await expect(a.append(target('held'), events(1, 1, 'a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(a.append(target('held'), events(2, 1, 'a'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    expect((await b.inspect(SessionId('held'))).events.map((e) => (e.data as { text: string }).text)).toEqual(['a0', 'b1'])
    // 'mine' was nobody else's: A's next append takes its lease again on a new connection, then writes.
    expect((await a.append(target('mine'), events(1, 1, 'a'))).nextSeq).toBe(2)
    expect(await b.writerOf(SessionId('mine'))).toEqual({ pid: process.pid, host: hostname() })
    const held = await leases(url)
    expect(held).toHaveLength(2)
    expect(held).not.toContain(holder)
    // Holding it again: B is refused.
    await expect(b.append(target('mine'), events(2, 1, 'b'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    expect(rejections).toEqual([])
  })

  it('the write-behind coordinator keeps the events of an outage in memory and lands them once the server returns, exactly once', async () => {
    const url = await outage.cluster().createDatabase()
    const persistence = await createPostgresPersistence({ pool: await pool(url) })
    const warnings: unknown[] = []
    const logger = { warn: (...args: unknown[]) => warnings.push(args), error: (...args: unknown[]) => warnings.push(args) }
    const ctx = new Context({ logger })
    ctx.provide('logger', logger)
    cleanups.push(() => ctx.dispose())
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0, retryDelayMs: 5, maxRetryDelayMs: 200 }))
    const sessions = ctx.require('sessions')
    const session = sessions.create({ id: 'buffered' })
    session.append('user/message', { text: 'before' })
    await sessions.flush(session)

    await outage.cluster().stopServer()
    for (let i = 0; i < 20; i++) session.append('user/message', { text: `during ${i}` })
    await expect(sessions.flush(session)).rejects.toMatchObject({ code: 'SESSION_FLUSH_FAILED' })
    await outage.cluster().startServer()

    await eventually(() => sessions.flush(session))
    const stored = await persistence.inspect(SessionId('buffered'))
    expect(stored.events.map((e) => (e.data as { text: string }).text)).toEqual([
      'before',
      ...Array.from({ length: 20 }, (_, i) => `during ${i}`),
    ])
    expect(warnings.length).toBeGreaterThan(0)
    expect(rejections).toEqual([])
  })

  it('a LISTEN re-opens with bounded backoff while the server is away: attempts follow the schedule, never a tight loop', async () => {
    const url = await outage.cluster().createDatabase()
    const p = await pool(url)
    let connects = 0
    const connect = p.connect.bind(p) as () => Promise<pg.PoolClient>
    ;(p as { connect: () => Promise<pg.PoolClient> }).connect = () => {
      connects++
      return connect()
    }
    let calls = 0
    let failures = 0
    const subscription = await subscribeChanges(p, () => calls++, { failed: () => failures++ })
    cleanups.push(() => subscription.close())
    expect(connects).toBe(1)

    const stopped = performance.now()
    await outage.cluster().stopServer()
    // Several retries fail meanwhile (the outage outlasts the first delays).
    await until(() => connects >= 5, 'the LISTEN was retried')
    const attempts = connects - 1
    const elapsed = performance.now() - stopped
    await outage.cluster().startServer()
    await until(() => calls === 1, 'the re-opened LISTEN called its listener once')
    // The first failure of the outage is reported once, not once per retry.
    expect(failures).toBe(1)
    // No more attempts than the backoff schedule fits into the time the server was away (plus the one at the loss).
    let fits = 0
    for (let spent = 0; spent <= elapsed; fits++) spent += retryDelay(fits + 1)
    expect(attempts).toBeLessThanOrEqual(fits + 1)
    expect(rejections).toEqual([])
  })
})

describe('Backoff', () => {
  it('doubles from the first delay up to the cap, keeps one retry pending, and starts over after a success', () => {
    vi.useFakeTimers()
    try {
      const at: number[] = []
      const backoff = new Backoff(() => {
        at.push(Date.now())
        backoff.failed()
      })
      const start = Date.now()
      backoff.failed()
      backoff.failed()
      vi.advanceTimersByTime(20_000)
      const gaps = at.map((t, i) => t - (i === 0 ? start : at[i - 1]!))
      expect(gaps.slice(0, 7)).toEqual([50, 100, 200, 400, 800, 1600, RETRY_CAP_MS])
      expect(new Set(gaps.slice(6))).toEqual(new Set([RETRY_CAP_MS]))
      backoff.succeeded()
      expect(backoff.failures).toBe(0)
      backoff.stop()
      const count = at.length
      vi.advanceTimersByTime(20_000)
      expect(at.length).toBe(count)
    } finally {
      vi.useRealTimers()
    }
  })
})
