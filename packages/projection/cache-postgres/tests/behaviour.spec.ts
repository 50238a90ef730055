import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { checkpointCacheSuite } from '@dsh/session-projection-cache/testing'
import type pg from 'pg'
import { postgresProjectionCachePlugin } from '../src/index.js'

checkpointCacheSuite<pg.Pool>('postgres', {
  async place() {
    const db = await freshDatabase()
    return { place: db.pool, close: () => db.end() }
  },
  activate: (ctx, pool, throttle) => ctx.activate(postgresProjectionCachePlugin({ pool, throttle })),
  invalidOptionsCode: 'POSTGRES_PROJECTION_CACHE_INVALID_OPTIONS',
  async rowCount(pool) {
    const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dsh_projection_checkpoints')
    return rows[0]!.n
  },
})
