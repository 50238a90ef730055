import { mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Session } from '@dsh/session'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import type { SqliteProjectionCache } from '../src/index.js'
import { entriesOf, host, turn, writtenCache } from './helpers.js'

// The directory holding a root's cache (`<root>/.dsh`) is written only when
// it is a directory of its own: through a symbolic link, the file, its WAL
// companions and a rebuild's new file would land wherever the link points,
// outside the root. A writer then writes nothing and reports
// `SESSION_PROJECTION_CACHE_UNAVAILABLE` (`not-a-directory`) through its
// logger; a file already there is still read read-only. Real directories
// and links, no mocks.

const KEYS = ['messages', 'turns'] as const
const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Host = Awaited<ReturnType<typeof host>>

async function open(path: string): Promise<Host & { cache: SqliteProjectionCache }> {
  // Ids of its own (`h1`, `h2`, …): never those of the sessions `written` stored.
  const h = await host({ path, throttle: { events: Infinity, ms: Infinity }, idPrefix: 'h' })
  cleanups.push(() => h.ctx.dispose())
  return h as Host & { cache: SqliteProjectionCache }
}

function scratch(): string {
  const { dir, cleanup } = tempDir('dsh-cache-linked-')
  cleanups.push(cleanup)
  return dir
}

/** A root whose `.dsh` is a symbolic link to `outside`, a directory beside the root (created unless `create` is false). */
function linkedRoot(create = true): { dotDsh: string; outside: string; path: string } {
  const base = scratch()
  const root = join(base, 'root')
  const outside = join(base, 'outside')
  mkdirSync(root)
  if (create) mkdirSync(outside)
  const dotDsh = join(root, '.dsh')
  symlinkSync(outside, dotDsh)
  return { dotDsh, outside, path: join(dotDsh, 'projections.sqlite') }
}

const lookup = (h: Host, session: Session) => h.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)

describe('a root whose .dsh is a symbolic link to a directory outside it', () => {
  it('a writer creates nothing in the link target: unavailable (not-a-directory) through its logger, saying what to do; writes fail softly', async () => {
    const { dotDsh, outside, path } = linkedRoot()
    const writer = await open(path)
    expect(writer.cache.unavailable).toMatchObject({
      code: 'SESSION_PROJECTION_CACHE_UNAVAILABLE',
      details: { path, state: 'not-a-directory' },
    })
    expect(writer.cache.unavailable?.message).toContain(`${dotDsh} is a symbolic link`)
    expect(writer.cache.unavailable?.message).toContain('replace the link with a directory, or remove it')
    expect(writer.warnings.some((w) => /cannot be opened/.test(w.message))).toBe(true)
    const session = writer.sessions.create()
    turn(session, 1, 'refused')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ writes: 0, failedWrites: 1, rebuilds: 0 })
    await writer.ctx.dispose()
    expect(readdirSync(outside)).toEqual([])
  })

  it('a cache file the target holds is read, never written: not one byte or file beside it changes', async () => {
    const { outside, path } = linkedRoot()
    const { sessions, values } = await writtenCache(outside, 2)
    const before = entriesOf(outside)
    const writer = await open(path)
    expect(sessions.map((s) => lookup(writer, s))).toEqual(values)
    expect(writer.cache.unavailable?.details).toMatchObject({ state: 'not-a-directory' })
    expect(writer.warnings.some((w) => /cannot be written \(not-a-directory\)/.test(w.message))).toBe(true)
    const fresh = writer.sessions.create()
    turn(fresh, 1, 'refused')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ writes: 0, failedWrites: 1 })
    await writer.ctx.dispose()
    expect(entriesOf(outside)).toEqual(before)
  })

  it('damage a read meets there is not rebuilt: the file in the target is neither removed nor recreated', async () => {
    const { outside, path } = linkedRoot()
    const { sessions } = await writtenCache(outside, 2)
    const file = join(outside, 'projections.sqlite')
    // The row pages zeroed past the header: the open checks identity and version only.
    const bytes = readFileSync(file)
    bytes.fill(0, 4096, bytes.length)
    writeFileSync(file, bytes)
    const before = entriesOf(outside)
    const writer = await open(path)
    for (const session of sessions) expect(lookup(writer, session)).toBeUndefined()
    const fresh = writer.sessions.create()
    turn(fresh, 1, 'not rebuilt')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ rebuilds: 0, writes: 0 })
    expect(writer.cache.unavailable?.details).toMatchObject({ state: 'not-a-directory' })
    await writer.ctx.dispose()
    expect(entriesOf(outside)).toEqual(before)
  })

  it('a dangling link is not followed either: its target is not created', async () => {
    const { outside, path } = linkedRoot(false)
    const writer = await open(path)
    expect(writer.cache.unavailable?.details).toMatchObject({ state: 'not-a-directory' })
    await writer.ctx.dispose()
    expect(() => statSync(outside)).toThrow(/ENOENT/)
  })
})

describe('a root whose .dsh is a directory', () => {
  it('a writer creates it 0700 and writes the cache there as usual', async () => {
    const root = join(scratch(), 'root')
    mkdirSync(root)
    const writer = await open(join(root, '.dsh', 'projections.sqlite'))
    expect(writer.cache.unavailable).toBeUndefined()
    const session = writer.sessions.create()
    turn(session, 1, 'kept')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ writes: 1, failedWrites: 0 })
    expect(lookup(writer, session)).toEqual(writer.projections.snapshot(session))
    expect(statSync(join(root, '.dsh')).mode & 0o777).toBe(0o700)
    expect(readdirSync(join(root, '.dsh'))).toContain('projections.sqlite')
  })
})
