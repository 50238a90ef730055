import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Session } from '@dsh/session'
import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import type { SqliteProjectionCache } from '../src/index.js'
import { entriesOf, host, turn, writtenCache } from './helpers.js'

// A cache file that cannot be opened for anything but damage is never
// deleted or recreated; hosts that only read never write. Real files: a
// read-only mount (or, without root, modes that forbid writing), a lock held
// by another connection, a damaged file.

const KEYS = ['messages', 'turns'] as const
const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Host = Awaited<ReturnType<typeof host>>

async function open(path: string, options: { readOnly?: boolean } = {}): Promise<Host & { cache: SqliteProjectionCache }> {
  // Ids of its own (`h1`, `h2`, …): never those of the sessions `written` stored.
  const h = await host({ path, throttle: { events: Infinity, ms: Infinity }, idPrefix: 'h', ...options })
  cleanups.push(() => h.ctx.dispose())
  return h as Host & { cache: SqliteProjectionCache }
}

function scratch(): string {
  const { dir, cleanup } = tempDir('dsh-cache-open-')
  cleanups.push(cleanup)
  return dir
}

/**
 * Makes `dir` unwritable for this process, for real: a read-only bind mount
 * over it when running as root (modes bind no one there), else modes that
 * forbid writing the directory and its files.
 */
function makeReadOnly(dir: string): void {
  if (process.getuid?.() === 0) {
    execFileSync('mount', ['--bind', dir, dir])
    cleanups.push(() => execFileSync('umount', ['-l', dir]))
    execFileSync('mount', ['-o', 'remount,ro,bind', dir])
    return
  }
  for (const name of readdirSync(dir)) chmodSync(join(dir, name), 0o400)
  chmodSync(dir, 0o500)
  cleanups.push(() => chmodSync(dir, 0o700))
}

const lookup = (h: Host, session: Session) => h.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)

describe('a cache on read-only storage', () => {
  it('a read-only host serves what the file holds, skips writes, and changes nothing', async () => {
    const dir = scratch()
    const { path, sessions, values } = await writtenCache(dir, 3)
    makeReadOnly(dir)
    const before = entriesOf(dir)
    const reader = await open(path, { readOnly: true })
    expect(sessions.map((s) => lookup(reader, s))).toEqual(values)
    expect(reader.cache.unavailable?.details).toEqual({ path, state: 'read-only' })
    const fresh = reader.sessions.create()
    turn(fresh, 1, 'not written')
    await reader.cache.idle()
    expect(await reader.cache.writeCheckpoint(fresh)).toBe(false)
    expect(reader.cache.metrics).toMatchObject({ writes: 0, rebuilds: 0 })
    await reader.ctx.dispose()
    expect(entriesOf(dir)).toEqual(before)
  })

  it('a writer on it reads the file, fails its writes softly with the typed reason, and neither rebuilds nor changes anything', async () => {
    const dir = scratch()
    const { path, sessions, values } = await writtenCache(dir, 3)
    makeReadOnly(dir)
    const before = entriesOf(dir)
    const writer = await open(path)
    expect(sessions.map((s) => lookup(writer, s))).toEqual(values)
    expect(writer.cache.unavailable).toMatchObject({ code: 'SESSION_PROJECTION_CACHE_UNAVAILABLE', details: { path, state: 'read-only' } })
    const fresh = writer.sessions.create()
    turn(fresh, 1, 'refused')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ writes: 0, failedWrites: 1, rebuilds: 0 })
    expect(writer.warnings.some((w) => /cannot be written \(read-only\)/.test(w.message))).toBe(true)
    await writer.ctx.dispose()
    expect(entriesOf(dir)).toEqual(before)
  })

  it('without a cache file: a writer on a read-only directory creates nothing, typed read-only; a read-only host stays quiet', async () => {
    const dir = scratch()
    mkdirSync(join(dir, 'sub'))
    makeReadOnly(dir)
    const writer = await open(join(dir, 'sub', 'projections.sqlite'))
    expect(writer.cache.unavailable?.details).toMatchObject({ state: 'read-only' })
    const reader = await open(join(dir, 'sub', 'projections.sqlite'), { readOnly: true })
    expect(reader.cache.unavailable?.details).toMatchObject({ state: 'missing' })
    expect(reader.warnings).toEqual([])
    expect(readdirSync(join(dir, 'sub'))).toEqual([])
  })
})

describe('a read-only host on writable storage', () => {
  it('reads hit, writes are skipped, and not one file beside the cache or byte of it changes', async () => {
    const dir = scratch()
    const { path, sessions, values } = await writtenCache(dir, 3)
    const before = entriesOf(dir)
    const reader = await open(path, { readOnly: true })
    expect(sessions.map((s) => lookup(reader, s))).toEqual(values)
    const fresh = reader.sessions.create()
    turn(fresh, 1, 'not written')
    await reader.cache.idle()
    await reader.ctx.dispose()
    expect(reader.cache.metrics).toMatchObject({ writes: 0, failedWrites: 0, rebuilds: 0 })
    expect(reader.warnings).toEqual([])
    expect(entriesOf(dir)).toEqual(before)
  })
})

describe('a cache file locked by another connection', () => {
  it('is reported locked, never rebuilt: its bytes and inode stay; writes succeed again once the lock is gone', async () => {
    const dir = scratch()
    const { path, sessions, values } = await writtenCache(dir, 3)
    const holder = new Database(path)
    holder.pragma('locking_mode = EXCLUSIVE')
    // The first write takes the exclusive lock; in exclusive locking mode it is kept until the connection closes.
    holder.exec('BEGIN EXCLUSIVE; CREATE TABLE held (x); DROP TABLE held; COMMIT')
    const bytes = readFileSync(path)
    const inode = statSync(path).ino
    let released = false
    cleanups.push(() => released || holder.close())

    const writer = await open(path)
    expect(writer.cache.unavailable).toMatchObject({ code: 'SESSION_PROJECTION_CACHE_UNAVAILABLE', details: { path, state: 'locked' } })
    expect(lookup(writer, sessions[0]!)).toBeUndefined()
    const reader = await open(path, { readOnly: true })
    expect(reader.cache.unavailable?.details).toMatchObject({ state: 'locked' })
    const fresh = writer.sessions.create()
    turn(fresh, 1, 'while locked')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ writes: 0, failedWrites: 1, rebuilds: 0 })
    expect(statSync(path).ino).toBe(inode)
    holder.close()
    released = true
    expect(readFileSync(path).equals(bytes)).toBe(true)

    // Refused writes try to open it for writing again (counted: the 1st, 2nd, 4th, … refused one).
    for (let n = 2; n <= 3 && writer.cache.metrics.writes === 0; n++) {
      turn(fresh, n, `after ${n}`)
      await writer.cache.idle()
    }
    expect(writer.cache.metrics.writes).toBe(1)
    expect(writer.cache.unavailable).toBeUndefined()
    expect(sessions.map((s) => lookup(writer, s))).toEqual(values)
    expect(lookup(writer, fresh)).toEqual(writer.projections.snapshot(fresh))
    expect(writer.cache.metrics.rebuilds).toBe(0)
  })
})

describe('a damaged cache file', () => {
  it('a read-only host reports it corrupt and leaves it; only a writer rebuilds it', async () => {
    const dir = scratch()
    const path = join(dir, 'projections.sqlite')
    writeFileSync(path, Buffer.alloc(8192, 0x5a))
    const before = entriesOf(dir)
    const reader = await open(path, { readOnly: true })
    expect(reader.cache.unavailable?.details).toEqual({ path, state: 'corrupt' })
    expect(reader.cache.metrics.rebuilds).toBe(0)
    await reader.ctx.dispose()
    expect(entriesOf(dir)).toEqual(before)
    const writer = await open(path)
    expect(writer.cache.metrics.rebuilds).toBe(1)
    expect(writer.cache.unavailable).toBeUndefined()
  })

  it('damage a read meets is not repaired by the read: the file stays until the next write rebuilds it', async () => {
    const dir = scratch()
    const { path, sessions } = await writtenCache(dir, 3)
    // The row pages zeroed past the header: the open checks identity and version only.
    const bytes = readFileSync(path)
    bytes.fill(0, 4096, bytes.length)
    writeFileSync(path, bytes)
    const writer = await open(path)
    expect(writer.cache.unavailable).toBeUndefined()
    const before = entriesOf(dir)
    for (const session of sessions) expect(lookup(writer, session)).toBeUndefined()
    expect(writer.cache.unavailable?.details).toMatchObject({ state: 'corrupt' })
    expect(writer.cache.metrics.rebuilds).toBe(0)
    expect(entriesOf(dir)).toEqual(before)
    const fresh = writer.sessions.create()
    turn(fresh, 1, 'rebuilt')
    await writer.cache.idle()
    expect(writer.cache.metrics).toMatchObject({ rebuilds: 1, writes: 1 })
    expect(lookup(writer, fresh)).toEqual(writer.projections.snapshot(fresh))
    expect(existsSync(path)).toBe(true)
  })
})
