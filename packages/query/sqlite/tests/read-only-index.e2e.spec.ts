import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createSqliteSessionQuery } from '../src/index.js'
import { header, later, message, openQuery, persist, store, tempDir } from './helpers.js'

// An index a writer cannot open for writing because its file system is
// read-only (EROFS, SQLITE_READONLY) is reported as read-only, never as
// damage: nothing is rebuilt or removed, and queries answer from the index
// and the logs. The file system is a real read-only bind mount (we run as
// root here and in CI; elsewhere the test fails with the reason, it is
// never skipped).

/** Every file under `dir`, with size and mtime: equal means nothing was written. */
function snapshot(dir: string): string[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .map((name) => {
      const stats = statSync(join(dir, name))
      return `${name} ${stats.size} ${stats.mtimeMs}`
    })
    .sort()
}

describe('an index on a read-only file system, opened by a writer', () => {
  it('is reported as read-only (SESSION_QUERY_INDEX_UNAVAILABLE), never as corrupt; listings answer every session and nothing on the mount changes', async () => {
    if (process.getuid?.() !== 0) throw new Error('This test bind-mounts a directory read-only: run it as root (CI does).')
    const persistence = createMemoryPersistence()
    for (let i = 0; i < 10; i++) await persist(persistence, header(`s${i}`, i), [message(0, `heron ${i}`)])
    const dir = join(tempDir(), 'index')
    mkdirSync(dir)
    const path = join(dir, '.dsh', 'index.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    await first.query.close()

    execFileSync('mount', ['--bind', dir, dir])
    later(() => execFileSync('umount', ['-l', dir]))
    execFileSync('mount', ['-o', 'remount,ro,bind', dir])
    // Written after the index: a writer would index these, and cannot.
    for (let i = 10; i < 15; i++) await persist(persistence, header(`s${i}`, i), [message(0, `heron ${i}`)])
    const before = snapshot(dir)

    const warnings: string[] = []
    const logger = { warn: (text: string) => void warnings.push(text), error: (text: string) => void warnings.push(text) }
    let failure: unknown
    try {
      const query = await createSqliteSessionQuery({ sessions: store().sessions, persistence, path, logger })
      later(() => query.close())
      expect((await query.listSessions()).records.map((record) => record.header.id)).toHaveLength(15)
      await query.reconcile().catch((error: unknown) => {
        failure = error
      })
      await query.close()
    } catch (error) {
      // Opening may already refuse; it must say why, in the same terms.
      failure = error
    }
    expect(failure).toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE' })
    const said = [(failure as Error).message, ...warnings].join('\n')
    expect(said).toContain('read-only')
    expect(said).not.toMatch(/corrupt|damaged/i)
    expect(snapshot(dir)).toEqual(before)
  })
})
