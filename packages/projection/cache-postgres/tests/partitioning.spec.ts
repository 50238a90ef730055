import { migrate } from '@dsh/session-persistence-postgres'
import { defineSchema } from '@dsh/session-persistence-postgres/backend'
import { distributionViolations } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { describe, expect, it } from 'vitest'
import { CACHE_COMPONENT, CACHE_MIGRATIONS, migrateCache } from '../src/index.js'

// The checkpoint table sits beside the session tables: hash-partitioned on
// session_key (the session's id_key) with the recorded count.
describe('the checkpoint table, partitioned', () => {
  it('a fresh database: the table follows the recorded partition count, and the catalog check passes', async () => {
    const db = await freshDatabase()
    try {
      await migrate(db.pool, { partitions: 3 })
      expect(await migrateCache(db.pool)).toEqual({ component: CACHE_COMPONENT, from: 0, to: CACHE_MIGRATIONS.length })
      expect(await distributionViolations(db.pool)).toEqual([])
      const { rows } = await db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'dsh_projection_checkpoints'::regclass",
      )
      expect(rows).toEqual([{ n: 3 }])
    } finally {
      await db.end()
    }
  })

  it('version 1 rows migrate in place: the same rows, and an update still re-stamps its row', async () => {
    const db = await freshDatabase()
    try {
      await defineSchema(CACHE_COMPONENT, CACHE_MIGRATIONS.slice(0, 1)).migrate(db.pool)
      await db.pool.query(
        `INSERT INTO dsh_projection_checkpoints (session_key, key, session_id, identity, inherited, state_version, seq, failed, state)
         SELECT sha256(convert_to('s' || n, 'UTF8')), 'k' || (n % 3), convert_to('s' || n, 'UTF8'), '\\x01', 0, 1, n, false, '{"n":' || n || '}'
         FROM generate_series(1, 60) n`,
      )
      const select =
        'SELECT session_key, key, session_id, identity, inherited, state_version, seq, failed, state, xid::text FROM dsh_projection_checkpoints ORDER BY session_key, key'
      const before = (await db.pool.query(select)).rows
      expect(await migrateCache(db.pool)).toEqual({ component: CACHE_COMPONENT, from: 1, to: CACHE_MIGRATIONS.length })
      expect(await distributionViolations(db.pool)).toEqual([])
      expect((await db.pool.query(select)).rows).toEqual(before)
      const { rows } = await db.pool.query<{ moved: boolean }>(
        "UPDATE dsh_projection_checkpoints SET seq = seq + 1 WHERE session_id = convert_to('s1', 'UTF8') RETURNING xid <> $1::xid8 AS moved",
        [before.find((r) => (r.session_id as Buffer).toString() === 's1')!.xid],
      )
      expect(rows).toEqual([{ moved: true }])
    } finally {
      await db.end()
    }
  })
})
