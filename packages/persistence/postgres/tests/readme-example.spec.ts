import { readFileSync } from 'node:fs'
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { expect, it } from 'vitest'

it('the README example runs as written (DSH_DATABASE_URL pointing at a fresh database)', async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  expect(readme).toContain('await ctx.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool })))')
  const db = await freshDatabase()
  await db.end()
  // The example, verbatim apart from the URL.
  const pool = new pg.Pool({ connectionString: db.url })
  const ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool })))
  const sessions = ctx.require('sessions')
  const session = sessions.create({ cwd: '/work' })
  session.append('user/message', { text: 'hello' })
  await sessions.flush(session)
  await ctx.dispose()
  await pool.end()
  // What it left behind: one durable session with its event, readable by another host.
  const check = new pg.Pool({ connectionString: db.url })
  const reader = await createPostgresPersistence({ pool: check })
  const stored = await reader.inspect(session.id)
  expect(stored.header.cwd).toBe('/work')
  expect(stored.events.map((e) => e.data)).toEqual([{ text: 'hello' }])
  await reader.close()
  await check.end()
})
