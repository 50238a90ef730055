import { SessionId } from '@dsh/session'
import { createPostgresPersistence, migrate, PostgresPersistenceError } from '@dsh/session-persistence-postgres'
import { createReaderRole } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { SESSION_MIGRATIONS } from '../src/schema.js'
import { events, failure, target } from './fixtures.js'

// Opening fails typed whatever the server answers: a role that may not
// create, a server that takes only read-only transactions, a backend ended
// while it waits for the migration lock, a statement timeout. The person
// opening learns the SQLSTATE and what to do, never a raw driver error.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const LATEST = SESSION_MIGRATIONS.length
/** The advisory lock every component's migration takes (`migrations.ts`). */
const MIGRATION_LOCK = 0x64736800

async function database() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  return db
}

function pool(url: string, options: pg.PoolConfig = {}): pg.Pool {
  const p = new pg.Pool({ connectionString: url, max: 2, ...options })
  p.on('error', () => {})
  cleanups.push(() => p.end().catch(() => {}))
  return p
}

describe('a role without CREATE on the schema', () => {
  it('migrating an empty database is MIGRATION_FAILED with the SQLSTATE and the grant or owner that fixes it', async () => {
    const db = await database()
    const url = await createReaderRole(db.url, { readOnlyTransactions: false })
    const error = await failure(migrate(pool(url)))
    expect(error).toBeInstanceOf(PostgresPersistenceError)
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED', details: { component: 'sessions', sqlState: '42501' } })
    expect(error.message).toMatch(/permission denied/)
    expect(error.message).toMatch(/GRANT CREATE ON SCHEMA public/)
    expect(error.message).toMatch(/owner/)
    // Opening (which migrates by default) fails alike.
    await expect(createPostgresPersistence({ connectionString: url })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      details: { sqlState: '42501' },
    })
  })

  it('opens an already-migrated database: nothing to migrate needs no CREATE, and it reads', async () => {
    const db = await database()
    const owner = await createPostgresPersistence({ pool: db.pool })
    await owner.append(target('kept'), events(0, 2))
    await owner.close()
    const url = await createReaderRole(db.url, { readOnlyTransactions: false })
    const reader = pool(url)
    expect(await migrate(reader)).toEqual({ component: 'sessions', from: LATEST, to: LATEST })
    // A count asked for is checked against the recorded one by reading it.
    expect(await migrate(reader, { partitions: 16 })).toEqual({ component: 'sessions', from: LATEST, to: LATEST })
    for (const options of [{}, { readOnly: true }, { migrate: false }]) {
      const p = await createPostgresPersistence({ pool: reader, ...options })
      try {
        expect((await p.inspect(SessionId('kept'))).events).toHaveLength(2)
        expect((await p.list()).map((r) => r.header.id)).toEqual(['kept'])
      } finally {
        await p.close()
      }
    }
  })
})

describe('a server that takes only read-only transactions (a standby after a failover)', () => {
  it('migrating an empty database is MIGRATION_FAILED naming the primary; a migrated one still opens', async () => {
    const db = await database()
    const name = new URL(db.url).pathname.slice(1)
    await db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`)
    const error = await failure(createPostgresPersistence({ pool: pool(db.url) }))
    expect(error).toBeInstanceOf(PostgresPersistenceError)
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED', details: { sqlState: '25006' } })
    expect(error.message).toMatch(/read-only/)
    expect(error.message).toMatch(/primary/)

    await db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = off`)
    const setup = pool(db.url)
    expect(await migrate(setup)).toMatchObject({ from: 0, to: LATEST })
    await setup.end()
    await db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`)
    const p = await createPostgresPersistence({ pool: pool(db.url) })
    expect(await p.list()).toEqual([])
    await p.close()
  })
})

describe('the server ending the migrating connection', () => {
  it('while migrate waits for the migration lock (pg_terminate_backend, as a shutdown does): UNAVAILABLE with the SQLSTATE', async () => {
    const db = await database()
    const holder = await db.pool.connect()
    cleanups.push(() => holder.release())
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
    const migrating = failure(migrate(pool(db.url)))
    let pid: number | undefined
    for (let attempt = 0; attempt < 5000 && pid === undefined; attempt++) {
      const { rows } = await db.pool.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'
         AND query LIKE '%pg_advisory_xact_lock%'`,
      )
      pid = rows[0]?.pid
      if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
    }
    expect(pid).toBeDefined()
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid])
    const error = await migrating
    expect(error).toBeInstanceOf(PostgresPersistenceError)
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_UNAVAILABLE', details: { sqlState: '57P01' } })
    expect(error.message).toContain(new URL(db.url).host)
    expect(error.message).toMatch(/ended the connection/)
    await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
  })
})

describe('a statement timeout while opening', () => {
  it('reading the schema version: a timeout with its own message, not a server that is down', async () => {
    const db = await database()
    await migrate(db.pool)
    const blocker = await db.pool.connect()
    cleanups.push(() => blocker.release())
    await blocker.query('BEGIN')
    await blocker.query('LOCK TABLE dsh_schema_version IN ACCESS EXCLUSIVE MODE')
    const timed = pool(db.url, { statement_timeout: 100 })
    for (const opening of [() => createPostgresPersistence({ pool: timed, migrate: false }), () => migrate(timed)]) {
      const error = await failure(opening())
      expect(error).toBeInstanceOf(PostgresPersistenceError)
      expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED', details: { sqlState: '57014' } })
      expect(error.message).toMatch(/timed out/)
      expect(error.message).toMatch(/statement_timeout/)
      expect(error.message).not.toMatch(/Check that the server runs/)
    }
    await blocker.query('ROLLBACK')
  })
})
