import { SessionId } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { distributionViolations, type TestDatabase } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import type pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { applyMigrations } from '../src/migrations.js'
import { migrate, SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '../src/schema.js'
import { events, header, target } from './fixtures.js'

// A batch row carries no foreign key to its session row (schema 6,
// src/schema.ts): the append's own UPDATE proves and locks the row, and a
// delete removes the batches itself (src/deletion.ts).
const databases: TestDatabase[] = []
afterEach(async () => {
  for (const db of databases.splice(0)) await db.end()
})
async function database(): Promise<TestDatabase> {
  const db = await freshDatabase()
  databases.push(db)
  return db
}

async function batchForeignKeys(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `SELECT conname AS name FROM pg_constraint WHERE contype = 'f' AND conrelid = 'dsh_batches'::regclass AND conparentid = 0 ORDER BY 1`,
  )
  return rows.map((r) => r.name)
}

async function batchRows(pool: pg.Pool, id: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM dsh_batches WHERE id_key = sha256(convert_to($1, 'UTF8'))`,
    [id],
  )
  return rows[0]!.n
}

describe('batch rows without a foreign key', () => {
  it('a fresh database: dsh_batches has no foreign key, and the layout rules still hold', async () => {
    const { pool } = await database()
    await migrate(pool)
    expect(await batchForeignKeys(pool)).toEqual([])
    expect(await distributionViolations(pool)).toEqual([])
  })

  it('a database at schema 5 (batches keyed to their session) upgrades to 6: the key is dropped, every batch is kept and reads back', async () => {
    const { pool } = await database()
    await applyMigrations(pool, SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 5))
    // Schema 5 as it stood: the batches' foreign key to their session row.
    await pool.query('ALTER TABLE dsh_batches ADD FOREIGN KEY (id_key, sid) REFERENCES dsh_sessions (id_key, sid) ON DELETE CASCADE')
    expect(await batchForeignKeys(pool)).toEqual(['dsh_batches_id_key_sid_fkey'])
    // Written by hand as schema 5 stores them: the backend itself only opens the newest schema.
    const before = await createPostgresPersistence({ pool, migrate: false }).catch((error: { code?: string }) => error.code)
    expect(before).toBe('POSTGRES_PERSISTENCE_MIGRATION_FAILED')
    await pool.query('UPDATE dsh_schema_version SET version = 6 WHERE component = $1', [SESSIONS_COMPONENT])
    const writer = await createPostgresPersistence({ pool, migrate: false })
    await writer.append(target('kept'), events(0, 2))
    await writer.append(target('kept'), events(2, 3))
    await writer.close()
    await pool.query('UPDATE dsh_schema_version SET version = 5 WHERE component = $1', [SESSIONS_COMPONENT])

    expect(await migrate(pool)).toEqual({ component: SESSIONS_COMPONENT, from: 5, to: SESSION_MIGRATIONS.length })
    expect(await batchForeignKeys(pool)).toEqual([])
    expect(await distributionViolations(pool)).toEqual([])
    const p = await createPostgresPersistence({ pool, migrate: false })
    try {
      expect((await p.inspect(SessionId('kept'))).events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
      expect(await batchRows(pool, 'kept')).toBe(2)
    } finally {
      await p.close()
    }
  })

  it('a delete removes the session’s batch rows with its row; a materializing delete leaves each dependant its own first batch', async () => {
    const { pool } = await database()
    const p = await createPostgresPersistence({ pool })
    try {
      await p.append(target('gone'), events(0, 2))
      await p.append(target('gone'), events(2, 2))
      expect(await batchRows(pool, 'gone')).toBe(2)
      expect(await p.delete(SessionId('gone'))).toBe(true)
      expect(await batchRows(pool, 'gone')).toBe(0)
      // A new lifecycle under the same id starts empty.
      await p.append(target('gone'), events(0, 1, 'again'))
      expect((await p.inspect(SessionId('gone'))).events.map((e) => e.data)).toEqual([{ text: 'again0' }])
      expect(await batchRows(pool, 'gone')).toBe(1)

      await p.append(target('source'), events(0, 3))
      const seed = (await p.inspect(SessionId('source'))).events
      const fork = { header: header('fork', 'source'), inheritedEventCount: 3 as never, forkSource: 'source' as never }
      await p.append(fork, [...seed, ...events(3, 1, 'own')])
      expect(await batchRows(pool, 'fork')).toBe(1)
      expect(await p.delete(SessionId('source'), { materializeDependants: true })).toBe(true)
      expect(await batchRows(pool, 'source')).toBe(0)
      expect(await batchRows(pool, 'fork')).toBe(2)
      expect((await p.inspect(SessionId('fork'))).events.map((e) => e.data)).toEqual([
        { text: 'e0' },
        { text: 'e1' },
        { text: 'e2' },
        { text: 'own3' },
      ])
      const { rows } = await pool.query<{ orphans: number }>(
        'SELECT count(*)::int AS orphans FROM dsh_batches b WHERE NOT EXISTS (SELECT 1 FROM dsh_sessions s WHERE s.id_key = b.id_key AND s.sid = b.sid)',
      )
      expect(rows).toEqual([{ orphans: 0 }])
    } finally {
      await p.close()
    }
  })
})
