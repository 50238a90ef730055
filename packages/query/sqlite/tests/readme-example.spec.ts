import { join } from 'node:path'
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import type { IndexProgress } from '@dsh/session-query'
import { expect, it } from 'vitest'
import { defaultIndexPath, type SqliteSessionQuery, sqliteSessionQueryPlugin } from '../src/index.js'
import { tempDir } from './helpers.js'

it('runs the README example', async () => {
  const root = tempDir()
  const progress: IndexProgress[] = []
  const ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root })))
  await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root), onProgress: (p) => void progress.push(p) }))
  const sessions = ctx.require('sessions')
  const query = ctx.require('sessionQuery') as SqliteSessionQuery

  const session = sessions.create({ id: 'notes', cwd: '/work' })
  session.append('user/message', { text: 'where did the heron nest?' })
  await sessions.dispose('notes')

  const listed = await query.listSessions({ cwd: '/work' })
  expect(listed.records.map((r) => [r.header.id, r.live, r.persisted])).toEqual([['notes', false, true]])
  const hits = await query.searchEvents({ text: 'heron' })
  expect(hits.hits.map((h) => h.snippet)).toEqual(['where did the [heron] nest?'])
  expect(await query.reconcile()).toMatchObject({ read: 0, removed: 0, corrupt: 0, failed: 0 })
  expect(progress[0]).toMatchObject({ phase: 'scan', rebuild: 'missing' })
  expect(join(root, '.dsh', 'index.sqlite')).toBe(defaultIndexPath(root))
  await ctx.dispose()
})
