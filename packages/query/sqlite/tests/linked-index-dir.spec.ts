import { mkdirSync, readdirSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { buildIndexFile, createSqliteSessionQuery } from '../src/index.js'
import { header, later, message, openQuery, persist, silent, store, tempDir } from './helpers.js'

// The directory holding a root's index (`<root>/.dsh`) is written only when
// it is a directory of its own: a symbolic link there would put what a build
// or a writer creates (generations, the path's link, WAL companions) wherever
// it points, outside the root. Real directories and links, no mocks.

/** Every entry under `dir`, with size and mtime: equal means nothing was written. */
function snapshot(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .map((name) => {
      const stats = statSync(join(dir, name))
      return `${name} ${stats.size} ${stats.mtimeMs}`
    })
}

async function sessions(count: number): Promise<SessionPersistence> {
  const persistence = createMemoryPersistence()
  for (let i = 0; i < count; i++) await persist(persistence, header(`s${i}`, i), [message(0, `heron ${i}`)])
  return persistence
}

/** A root whose `.dsh` is a symbolic link to `outside` (an empty directory beside the root, unless `target` says otherwise). */
function linkedRoot(target?: (outside: string) => void): { root: string; outside: string; path: string } {
  const base = tempDir()
  const root = join(base, 'root')
  const outside = join(base, 'outside')
  mkdirSync(root)
  if (target === undefined) mkdirSync(outside)
  else target(outside)
  symlinkSync(outside, join(root, '.dsh'))
  return { root, outside, path: join(root, '.dsh', 'index.sqlite') }
}

/** What the promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<{ code?: string; message: string; details?: Record<string, unknown> }> {
  try {
    await promise
  } catch (error) {
    return error as { code?: string; message: string; details?: Record<string, unknown> }
  }
  throw new Error('expected a rejection')
}

describe('a root whose .dsh is a symbolic link to a directory outside it', () => {
  it('dsh reindex (buildIndexFile) writes nothing into the link target and fails SESSION_QUERY_INDEX_UNAVAILABLE (not-a-directory) saying what to do', async () => {
    const persistence = await sessions(5)
    const { root, outside, path } = linkedRoot()

    const error = await failure(buildIndexFile({ persistence, path, logger: silent }))

    expect(error).toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE', details: { path, state: 'not-a-directory' } })
    expect(error.message).toContain(`${join(root, '.dsh')} is a symbolic link`)
    expect(error.message).toContain('replace the link with a directory, or remove it and run dsh reindex')
    expect(readdirSync(outside)).toEqual([])
  })

  it('a writer neither builds an index there nor writes the one the target holds; it still reads it', async () => {
    const persistence = await sessions(5)
    const { outside, path } = linkedRoot((dir) => {
      mkdirSync(dir)
    })
    // An index built while `.dsh` was a directory, then moved out behind the link.
    const real = join(tempDir(), 'root')
    mkdirSync(real)
    await buildIndexFile({ persistence, path: join(real, '.dsh', 'index.sqlite'), logger: silent })
    for (const name of readdirSync(join(real, '.dsh'))) renameSync(join(real, '.dsh', name), join(outside, name))
    await persist(persistence, header('late', 10), [message(0, 'a late otter')])
    const before = snapshot(outside)

    const warnings: string[] = []
    const logger = { warn: (text: string) => void warnings.push(text), error: (text: string) => void warnings.push(text) }
    const { ctx, sessions: live } = store()
    const writer = await createSqliteSessionQuery({ sessions: live, persistence, path, context: ctx, logger })
    later(() => writer.close())
    expect((await writer.listSessions()).records).toHaveLength(6)
    expect(await failure(writer.reconcile())).toMatchObject({
      code: 'SESSION_QUERY_INDEX_UNAVAILABLE',
      details: { path, state: 'not-a-directory' },
    })
    expect(await failure(writer.rebuild())).toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE' })
    await writer.close()

    expect(warnings.some((text) => text.includes('cannot be written (not-a-directory)'))).toBe(true)
    expect(snapshot(outside)).toEqual(before)
  })

  it('a writer over a link to an empty directory creates nothing there', async () => {
    const persistence = await sessions(3)
    const { outside, path } = linkedRoot()
    const { ctx, sessions: live } = store()
    const writer = await createSqliteSessionQuery({ sessions: live, persistence, path, context: ctx, logger: silent })
    later(() => writer.close())
    expect((await writer.listSessions()).records).toHaveLength(3)
    expect(await failure(writer.reconcile())).toMatchObject({
      code: 'SESSION_QUERY_INDEX_UNAVAILABLE',
      details: { state: 'not-a-directory' },
    })
    await writer.close()
    expect(readdirSync(outside)).toEqual([])
  })

  it('a dangling link is not followed either: its target is not created', async () => {
    const persistence = await sessions(2)
    const { outside, path } = linkedRoot(() => {})

    const error = await failure(buildIndexFile({ persistence, path, logger: silent }))

    expect(error).toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE', details: { state: 'not-a-directory' } })
    expect(() => statSync(outside)).toThrow(/ENOENT/)
  })
})

describe('a root whose .dsh is not a directory', () => {
  it('a file there is refused as not-a-directory, and left as it was', async () => {
    const persistence = await sessions(2)
    const root = join(tempDir(), 'root')
    mkdirSync(root)
    writeFileSync(join(root, '.dsh'), 'not a directory')

    const error = await failure(buildIndexFile({ persistence, path: join(root, '.dsh', 'index.sqlite'), logger: silent }))

    expect(error).toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE', details: { state: 'not-a-directory' } })
    expect(error.message).toContain(`${join(root, '.dsh')} is not a directory`)
    expect(statSync(join(root, '.dsh')).isFile()).toBe(true)
  })
})

describe('a root whose .dsh is a directory', () => {
  it('is built into, created 0700 when missing, and written by a writer as usual', async () => {
    const persistence = await sessions(4)
    const root = join(tempDir(), 'root')
    mkdirSync(root)
    const path = join(root, '.dsh', 'index.sqlite')

    expect(await buildIndexFile({ persistence, path, logger: silent })).toMatchObject({ rebuild: 'requested', listed: 4 })
    expect(statSync(join(root, '.dsh')).mode & 0o777).toBe(0o700)
    expect(readdirSync(join(root, '.dsh')).some((name) => /^index-.+\.sqlite$/.test(name))).toBe(true)

    await persist(persistence, header('late', 10), [message(0, 'a late otter')])
    const { query } = await openQuery({ sessions: store().sessions, persistence, path })
    expect(await query.reconcile()).toMatchObject({ failed: 0 })
    expect((await query.searchEvents({ text: 'otter' })).hits.map((hit) => hit.id)).toEqual(['late'])
  })
})
