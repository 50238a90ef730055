// One dsh host on PostgreSQL, composed from the plugins directly (what
// createHost({ postgres }) does): store, persistence + coordinator, projections,
// the checkpoint cache, the query backend and subagents with a scripted driver,
// all over one pg pool. Plain JS, so a child process (resolving the built
// dist/) and a vitest process (resolving src/) compose the very same host.
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { postgresProjectionCachePlugin } from '@dsh/session-projection-cache-postgres'
import { postgresSessionQueryPlugin } from '@dsh/session-query-postgres'
import { createScriptedDriver, subagentsPlugin } from '@dsh/subagent'
import pg from 'pg'

export async function composePostgresHost(url, name) {
  const pool = new pg.Pool({ connectionString: url, max: 8 })
  pool.on('error', () => {})
  const quiet = { warn: () => {}, error: () => {} }
  const ctx = new Context({ logger: quiet })
  ctx.provide('logger', quiet)
  let n = 0
  const persistence = await createPostgresPersistence({ pool })
  await ctx.activate(sessionStorePlugin({ newId: () => `${name}-${++n}` }))
  await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(postgresProjectionCachePlugin({ pool }))
  await ctx.activate(postgresSessionQueryPlugin({ pool }))
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver() }))
  return {
    ctx,
    pool,
    persistence,
    sessions: ctx.require('sessions'),
    subagents: ctx.require('subagents'),
    cache: ctx.require('sessionProjectionCache'),
    async dispose() {
      await ctx.dispose()
      await pool.end()
    },
  }
}
