import { SessionId } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { distributionViolations, generateHeaderSessions, type TestDatabase } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { applyMigrations } from '../src/migrations.js'
import { migrate, SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '../src/schema.js'
import { events, header, target } from './fixtures.js'

// The per-session tables are hash-partitioned on the session's key, and every
// key includes it (src/layout.ts); the catalog says so, or the checker fails.
const databases: TestDatabase[] = []
afterEach(async () => {
  for (const db of databases.splice(0)) await db.end()
})
async function database(): Promise<TestDatabase> {
  const db = await freshDatabase()
  databases.push(db)
  return db
}

async function partitionCounts(pool: pg.Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ name: string; n: number }>(
    `SELECT c.relname AS name, count(i.inhrelid)::int AS n FROM pg_class c JOIN pg_partitioned_table p ON p.partrelid = c.oid
     LEFT JOIN pg_inherits i ON i.inhparent = c.oid WHERE c.relnamespace = current_schema()::regnamespace GROUP BY c.relname`,
  )
  return Object.fromEntries(rows.map((r) => [r.name, r.n]))
}

describe('the partitioned layout', () => {
  it('a fresh database: every per-session table is hash-partitioned on id_key into 16, every key includes it, and the count is recorded', async () => {
    const { pool } = await database()
    expect(await migrate(pool)).toEqual({ component: SESSIONS_COMPONENT, from: 0, to: SESSION_MIGRATIONS.length })
    expect(await distributionViolations(pool)).toEqual([])
    const counts = await partitionCounts(pool)
    expect(counts).toMatchObject({ dsh_sessions: 16, dsh_batches: 16, dsh_changes: 16 })
    expect(new Set(Object.values(counts))).toEqual(new Set([16]))
    expect((await pool.query('SELECT partitions FROM dsh_layout')).rows).toEqual([{ partitions: 16 }])
  })

  it('a database upgraded from schema 3 has the same tables, columns, keys and indexes as one created at the newest schema', async () => {
    const fresh = await database()
    await migrate(fresh.pool)
    const upgraded = await database()
    await applyMigrations(upgraded.pool, SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 3))
    expect(await migrate(upgraded.pool)).toEqual({ component: SESSIONS_COMPONENT, from: 3, to: SESSION_MIGRATIONS.length })
    const catalog = async (pool: pg.Pool) =>
      (
        await pool.query<{ line: string }>(
          `SELECT c.relname || ' column ' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
                  || ' ' || a.attidentity::text || ' ' || a.attstorage::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS line
           FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
           WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
           UNION ALL
           SELECT conrelid::regclass::text || ' constraint ' || pg_get_constraintdef(oid) FROM pg_constraint
           WHERE connamespace = current_schema()::regnamespace AND contype IN ('p', 'u', 'f', 'c')
           UNION ALL
           SELECT tablename || ' index ' || regexp_replace(indexdef, 'INDEX \\S+ ON', 'INDEX ON') FROM pg_indexes WHERE schemaname = current_schema()
           ORDER BY 1`,
        )
      ).rows.map((r) => r.line)
    const expected = await catalog(fresh.pool)
    expect(expected.length).toBeGreaterThan(100)
    expect(await catalog(upgraded.pool)).toEqual(expected)
  })

  it('the partition count is chosen at the first migration; a later run keeps it and refuses another', async () => {
    const { pool } = await database()
    await migrate(pool, { partitions: 4 })
    const counts = await partitionCounts(pool)
    expect(counts).toMatchObject({ dsh_sessions: 4, dsh_batches: 4, dsh_changes: 4 })
    expect(new Set(Object.values(counts))).toEqual(new Set([4]))
    expect(await migrate(pool)).toEqual({ component: SESSIONS_COMPONENT, from: SESSION_MIGRATIONS.length, to: SESSION_MIGRATIONS.length })
    expect(await migrate(pool, { partitions: 4 })).toMatchObject({ to: SESSION_MIGRATIONS.length })
    await expect(migrate(pool, { partitions: 8 })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      message: expect.stringContaining('split into 4 partitions'),
    })
    for (const bad of [0, 1025, 2.5])
      await expect(migrate(pool, { partitions: bad })).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS' })
    expect(await partitionCounts(pool)).toEqual(counts)
  })

  it('the checker reports each planted violation: no key, not partitioned, a key without the distribution key, a reference across sessions, another count', async () => {
    const { pool } = await database()
    await pool.query('CREATE SCHEMA planted')
    const statements = [
      `CREATE TABLE planted.good (id_key bytea NOT NULL, sid bigint NOT NULL, alias bytea NOT NULL, PRIMARY KEY (id_key), UNIQUE (id_key, sid), UNIQUE (id_key, alias))
       PARTITION BY HASH (id_key)`,
      'CREATE TABLE planted.good_p0 PARTITION OF planted.good FOR VALUES WITH (MODULUS 2, REMAINDER 0)',
      'CREATE TABLE planted.good_p1 PARTITION OF planted.good FOR VALUES WITH (MODULUS 2, REMAINDER 1)',
      // A per-session table without the key.
      'CREATE TABLE planted.no_key (sid bigint PRIMARY KEY, n integer)',
      // The key, but a plain table.
      'CREATE TABLE planted.plain (id_key bytea NOT NULL, sid bigint PRIMARY KEY)',
      // Partitioned, but its unique key and its reference leave the key out / cross sessions.
      `CREATE TABLE planted.bad_keys (id_key bytea NOT NULL, sid bigint NOT NULL, other_key bytea, n integer,
         UNIQUE (id_key, sid), FOREIGN KEY (other_key, sid) REFERENCES planted.good (id_key, sid)) PARTITION BY HASH (id_key)`,
      'CREATE TABLE planted.bad_keys_p0 PARTITION OF planted.bad_keys FOR VALUES WITH (MODULUS 2, REMAINDER 0)',
      'CREATE TABLE planted.bad_keys_p1 PARTITION OF planted.bad_keys FOR VALUES WITH (MODULUS 2, REMAINDER 1)',
      // The key is in the reference, but it names another row's column: the referenced row is another session's.
      `CREATE TABLE planted.crossing (id_key bytea NOT NULL, other_key bytea NOT NULL,
         FOREIGN KEY (other_key, id_key) REFERENCES planted.good (id_key, alias)) PARTITION BY HASH (id_key)`,
      'CREATE TABLE planted.crossing_p0 PARTITION OF planted.crossing FOR VALUES WITH (MODULUS 2, REMAINDER 0)',
      'CREATE TABLE planted.crossing_p1 PARTITION OF planted.crossing FOR VALUES WITH (MODULUS 2, REMAINDER 1)',
    ]
    for (const statement of statements) await pool.query(statement)
    expect(await distributionViolations(pool, 'planted')).toEqual([
      { table: 'no_key', problem: 'names sessions (sid) but carries no distribution key (id_key)' },
      { table: 'plain', problem: 'is not hash-partitioned on its distribution key id_key (PARTITION BY HASH (id_key))' },
      { table: 'bad_keys', problem: 'foreign key bad_keys_other_key_sid_fkey does not include the distribution key id_key' },
      {
        table: 'crossing',
        problem:
          "foreign key crossing_other_key_id_key_fkey does not map id_key onto the referenced table's distribution key (a reference across sessions)",
      },
      { table: 'plain', problem: 'primary key plain_pkey does not include the distribution key id_key' },
    ])
    // A table hashed on something else, and a partition count of its own.
    await pool.query('CREATE TABLE planted.wrong_hash (id_key bytea NOT NULL, sid bigint NOT NULL) PARTITION BY HASH (sid)')
    await pool.query(
      'CREATE TABLE planted.three (session_key bytea NOT NULL, k text, PRIMARY KEY (session_key, k)) PARTITION BY HASH (session_key)',
    )
    for (let i = 0; i < 3; i++)
      await pool.query(`CREATE TABLE planted.three_p${i} PARTITION OF planted.three FOR VALUES WITH (MODULUS 3, REMAINDER ${i})`)
    const problems = await distributionViolations(pool, 'planted')
    expect(problems).toContainEqual({
      table: 'wrong_hash',
      problem: 'is not hash-partitioned on its distribution key id_key (PARTITION BY HASH (id_key))',
    })
    expect(problems).toContainEqual({
      table: 'three',
      problem: 'has 3 partitions; the per-session tables do not share one count (2, 3)',
    })
    // The unique key without the key is refused by PostgreSQL itself on a partitioned table; the checker sees what the server allowed.
    await expect(pool.query('ALTER TABLE planted.good ADD CONSTRAINT good_sid UNIQUE (sid)')).rejects.toThrow(
      /must include all partitioning columns/,
    )
  })

  it('a fork source cannot be deleted while a fork names it: the delete locks the source and checks inside its transaction', async () => {
    const { pool } = await database()
    const p = await createPostgresPersistence({ pool })
    try {
      await p.append(target('source'), events(0, 3))
      const seed = (await p.inspect(SessionId('source'))).events
      const fork = { header: header('fork', 'source'), inheritedEventCount: 3 as never, forkSource: 'source' as never }
      await p.append(fork, [...seed, ...events(3, 1, 'own')])
      expect((await pool.query("SELECT fork_sid IS NOT NULL AS ref FROM dsh_sessions WHERE id = convert_to('fork', 'UTF8')")).rows).toEqual(
        [{ ref: true }],
      )
      await expect(p.delete(SessionId('source'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
      expect(await p.stat(SessionId('source'))).toBeDefined()
      expect((await p.inspect(SessionId('fork'))).events).toHaveLength(4)
      // Once the fork is gone, so is the refusal.
      expect(await p.delete(SessionId('fork'))).toBe(true)
      expect(await p.delete(SessionId('source'))).toBe(true)
      expect(await p.stat(SessionId('source'))).toBeUndefined()
    } finally {
      await p.close()
    }
  })

  it('a fork made while its source is being deleted waits for the delete, then is refused: no fork names a source that is gone', async () => {
    const { pool, url } = await database()
    const p = await createPostgresPersistence({ pool })
    const deleter = new pg.Client({ connectionString: url })
    try {
      await p.append(target('doomed'), events(0, 2))
      const seed = (await p.inspect(SessionId('doomed'))).events
      // Another transaction holds the source row as a delete does (FOR UPDATE) and deletes it.
      await deleter.connect()
      await deleter.query('BEGIN')
      await deleter.query("SELECT 1 FROM dsh_sessions WHERE id = convert_to('doomed', 'UTF8') FOR UPDATE")
      const fork = { header: header('orphan', 'doomed'), inheritedEventCount: 2 as never, forkSource: 'doomed' as never }
      const made = p.append(fork, [...seed, ...events(2, 1)]).then(
        () => 'stored',
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      )
      // The fork's insert waits on the source row's lock (FOR KEY SHARE against FOR UPDATE).
      for (;;) {
        const { rows } = await pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR KEY SHARE%'",
        )
        if (rows.length > 0) break
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await deleter.query("DELETE FROM dsh_sessions WHERE id = convert_to('doomed', 'UTF8')")
      await deleter.query('COMMIT')
      expect(await made).toMatch(/^SESSION_PERSISTENCE_CONFLICT: The fork source 'doomed' was deleted/)
      expect(await p.stat(SessionId('orphan'))).toBeUndefined()
      expect((await pool.query('SELECT count(*)::int AS n FROM dsh_sessions WHERE fork_sid IS NOT NULL')).rows).toEqual([{ n: 0 }])
    } finally {
      await deleter.end().catch(() => {})
      await p.close()
    }
  })

  it('sessions written by generateHeaderSessions read, list, fork and refuse deletion as any the backend wrote', async () => {
    const { pool } = await database()
    const p = await createPostgresPersistence({ pool })
    try {
      await generateHeaderSessions(pool, { count: 6, prefix: 'g-', events: 2, childrenPerRoot: 2 })
      expect(await distributionViolations(pool)).toEqual([])
      const listed = (await p.list()).map((r) => [r.header.id, r.header.parentSession ?? null])
      expect(listed.sort()).toEqual([
        ['g-00000001', null],
        ['g-00000002', 'g-00000001'],
        ['g-00000003', 'g-00000001'],
        ['g-00000004', null],
        ['g-00000005', 'g-00000004'],
        ['g-00000006', 'g-00000004'],
      ])
      const seed = (await p.inspect(SessionId('g-00000004'))).events
      expect(seed.map((e) => e.data)).toEqual([{ text: 'm0' }, { text: 'm1' }])
      await p.append({ header: (await p.inspect(SessionId('g-00000004'))).header, inheritedEventCount: 0 as never }, events(2, 1))
      const fork = { header: header('g-fork', 'g-00000004'), inheritedEventCount: 3 as never, forkSource: 'g-00000004' as never }
      await p.append(fork, [...(await p.inspect(SessionId('g-00000004'))).events, ...events(3, 1, 'own')])
      await expect(p.delete(SessionId('g-00000004'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
      expect((await p.inspect(SessionId('g-fork'))).events).toHaveLength(4)
    } finally {
      await p.close()
    }
  })
})
