import { execFileSync, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@dsh/host'
import { fill, mountTmpfs, unmount } from '@dsh/tooling/tmpfs'
import { afterEach, describe, expect, it } from 'vitest'
import { dsh, hitIds, indexGeneration, listedIds, sessionId, snapshot, writeIndexed, writeUnindexed } from './support/index-root.js'

// Reads never write the query index: read commands open it read-only and
// answer what it lacks from the logs; a full disk, a read-only mount or a
// lock is reported as what it is, and no read removes or rewrites a file.
// The built CLI in real processes, real SQLite files, a real tmpfs and a
// real read-only bind mount (the tests run as root, as CI does).

const cleanups: Array<() => void> = []
afterEach(() => {
  while (cleanups.length > 0) cleanups.pop()!()
})

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-index-reads-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Only the index: its link and every generation file with its companions (a new file of the index shows up here too). */
const indexOnly = (name: string): boolean => name === '.dsh' || name.startsWith('.dsh/index')

const ids = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => sessionId(prefix, i))

/** better-sqlite3 as the index package resolves it (the CLI bundles no SQLite of its own). */
const sqlite = createRequire(join(import.meta.dirname, '..', '..', '..', 'packages', 'query', 'sqlite', 'package.json')).resolve(
  'better-sqlite3',
)

describe('reads never write the index', () => {
  it('a stale index: listing and search answer the sessions written since it, and the index file does not change', async () => {
    const root = join(scratch(), 'root')
    await writeIndexed(root, 'a', 40, 'heron')
    // Written after the index, by a process that keeps no index (as an import through persistence does).
    await writeUnindexed(root, 'b', 25, 'otter')
    const before = snapshot(root, indexOnly)
    const size = statSync(indexGeneration(root)).size

    const listing = await dsh(['sessions', '--root', root, '--json'])
    expect(listing.code, listing.stderr).toBe(0)
    expect(listedIds(listing.stdout).sort()).toEqual([...ids('a', 40), ...ids('b', 25)].sort())
    const otters = await dsh(['search', 'otter', '--root', root, '--json', '--limit', '100'])
    expect(otters.code, otters.stderr).toBe(0)
    expect(hitIds(otters.stdout)).toEqual(ids('b', 25))
    const herons = await dsh(['search', 'heron', '--root', root, '--json', '--limit', '100'])
    expect(hitIds(herons.stdout)).toEqual(ids('a', 40))
    const shown = await dsh(['show', sessionId('b', 3), '--root', root, '--json'])
    expect(shown.code, shown.stderr).toBe(0)

    // Not one byte of the index, nor any new file beside it.
    expect(statSync(indexGeneration(root)).size).toBe(size)
    expect(snapshot(root, indexOnly)).toEqual(before)
  })

  it('a read-only bind mount: sessions, show, agents and search answer, and nothing on the mount changes', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    await writeIndexed(root, 'a', 30, 'heron')
    const host = await createHost({ root })
    try {
      const parent = host.sessions.create({ id: 'parent' })
      parent.append('user/message', { text: 'delegate the heron count' })
      const child = host.subagents.spawn(parent, { mode: 'one-shot', label: 'counter', context: 'fresh', prompt: 'count herons' })
      await child.done
    } finally {
      await host.dispose()
    }
    await writeUnindexed(root, 'b', 5, 'otter')
    const mount = join(dir, 'ro')
    mkdirSync(mount)
    execFileSync('mount', ['--bind', root, mount])
    cleanups.push(() => execFileSync('umount', ['-l', mount]))
    execFileSync('mount', ['-o', 'remount,ro,bind', mount])
    const before = snapshot(mount)

    const listing = await dsh(['sessions', '--root', mount, '--json'])
    expect(listing.code, listing.stderr).toBe(0)
    expect(listedIds(listing.stdout)).toHaveLength(30 + 2 + 5)
    const shown = await dsh(['show', 'parent', '--root', mount, '--json'])
    expect(shown.code, shown.stderr).toBe(0)
    const agents = await dsh(['agents', 'parent', '--root', mount, '--json'])
    expect(agents.code, agents.stderr).toBe(0)
    expect((JSON.parse(agents.stdout) as { rows: Array<{ label?: string }> }).rows.map((r) => r.label)).toEqual(['counter'])
    const search = await dsh(['search', 'otter', '--root', mount, '--json'])
    expect(search.code, search.stderr).toBe(0)
    expect(hitIds(search.stdout)).toEqual(ids('b', 5))
    const events = await dsh(['search', 'heron', '--events', '--root', mount, '--json', '--limit', '100'])
    expect(events.code, events.stderr).toBe(0)

    expect(snapshot(mount)).toEqual(before)
  })

  it('a full disk: read commands answer, and the index keeps its file, its bytes and its name', async () => {
    const dir = scratch()
    const mount = join(dir, 'disk')
    mkdirSync(mount, { mode: 0o700 })
    mountTmpfs(mount, '8m')
    cleanups.push(() => unmount(mount))
    const root = join(mount, 'root')
    await writeIndexed(root, 'a', 60, 'heron')
    expect(fill(join(mount, 'filler'))).toBeGreaterThan(1024 * 1024)
    const before = snapshot(root, indexOnly)

    for (const args of [
      ['sessions', '--json'],
      ['agents', sessionId('a', 1), '--json'],
      ['show', sessionId('a', 2), '--json'],
      ['search', 'heron', '--json', '--limit', '100'],
    ]) {
      const result = await dsh([...args, '--root', root])
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(0)
      if (args[0] === 'sessions') expect(listedIds(result.stdout)).toHaveLength(60)
      if (args[0] === 'search') expect(hitIds(result.stdout)).toEqual(ids('a', 60))
    }
    expect(snapshot(root, indexOnly)).toEqual(before)

    // A writing host on the full disk keeps the index too: it cannot write it, so it reads it.
    const generation = indexGeneration(root)
    const inode = statSync(generation).ino
    const warnings: string[] = []
    const host = await createHost({ root, logger: { warn: (message) => void warnings.push(message), error: () => {} } })
    try {
      expect((await host.query.listSessions({})).records).toHaveLength(60)
      expect((await host.query.searchSessions!({ text: 'heron', limit: 100 })).hits).toHaveLength(60)
    } finally {
      await host.dispose()
    }
    expect(indexGeneration(root)).toBe(generation)
    expect(statSync(generation).ino).toBe(inode)
    expect(snapshot(root, indexOnly).filter((line) => line.includes('-wal') || line.includes('-shm'))).toEqual([])
  })

  it('a locked index: listings answer from the logs, search says the index is unavailable (locked), and the file stays', async () => {
    const root = join(scratch(), 'root')
    await writeIndexed(root, 'a', 20, 'heron')
    const before = snapshot(root, indexOnly)
    // Another process holds the index exclusively (a rollback-journal EXCLUSIVE lock) until told to stop.
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const D = require(${JSON.stringify(sqlite)})
         const db = new D(process.argv[1]); db.exec('BEGIN EXCLUSIVE'); process.stdout.write('locked\\n')
         process.stdin.on('data', () => { db.exec('ROLLBACK'); db.close(); process.exit(0) })`,
        indexGeneration(root),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    cleanups.push(() => holder.kill('SIGKILL'))
    await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()))

    const listing = await dsh(['sessions', '--root', root, '--json'])
    expect(listing.code, listing.stderr).toBe(0)
    expect(listedIds(listing.stdout)).toEqual(ids('a', 20))
    const search = await dsh(['search', 'heron', '--root', root, '--json'])
    expect(search.code).toBe(1)
    expect(JSON.parse(search.stdout)).toMatchObject({ error: { code: 'SESSION_QUERY_INDEX_UNAVAILABLE' } })
    expect(JSON.parse(search.stdout).error.message).toContain('locked')

    holder.stdin.end('go\n')
    await new Promise((resolve) => holder.once('exit', resolve))
    expect(snapshot(root, indexOnly)).toEqual(before)
  })
})
