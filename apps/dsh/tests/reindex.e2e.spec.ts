import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@dsh/host'
import { fill, mountTmpfs, unmount } from '@dsh/tooling/tmpfs'
import { afterEach, describe, expect, it } from 'vitest'
import { dsh, hitIds, indexGeneration, listedIds, sessionId, snapshot, writeIndexed, writeUnindexed } from './support/index-root.js'

// `dsh reindex` builds a new index beside the old one and swaps it in: every
// other command keeps answering meanwhile, a writer holding the old index
// notices the swap and catches the new one up, and a rebuild that fails
// leaves the old index and nothing else. A rebuild is held between the
// finished new file and the swap through DSH_REINDEX_HOLD (a FIFO), so
// "during" is an order of events, not a matter of timing.

const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
/** better-sqlite3 as the index package resolves it, to look into the index file itself. */
const Database = createRequire(join(import.meta.dirname, '..', '..', '..', 'packages', 'query', 'sqlite', 'package.json'))(
  'better-sqlite3',
) as typeof import('better-sqlite3')

const cleanups: Array<() => void> = []
afterEach(() => {
  while (cleanups.length > 0) cleanups.pop()!()
})

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-reindex-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const ids = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => sessionId(prefix, i))

/** Starts `dsh reindex` held before its swap; resolves once it says it is held, with a way to let it go and its exit. */
async function heldReindex(
  root: string,
  dir: string,
): Promise<{ release(): Promise<void>; exit: Promise<{ code: number | null; stdout: string; stderr: string }> }> {
  const fifo = join(dir, 'hold')
  execFileSync('mkfifo', [fifo])
  const child = spawn(process.execPath, [bin, 'reindex', '--root', root, '--json'], {
    env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '', DSH_REINDEX_HOLD: fifo },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  cleanups.push(() => child.kill('SIGKILL'))
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => (stdout += chunk))
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const exit = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  )
  // Opening the FIFO for reading waits for the rebuild to reach its hold and say so.
  expect(await readFile(fifo, 'utf8')).toBe('held\n')
  return { release: () => writeFile(fifo, 'go\n'), exit }
}

describe('dsh reindex', () => {
  it('20 listings during a held rebuild all answer; the rebuild succeeds; a writer holding the old index catches the new one up', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    await writeIndexed(root, 'a', 120, 'heron')
    const old = indexGeneration(root)
    // A writer that keeps running across the rebuild, holding the old index.
    const writer = await createHost({ root })
    cleanups.push(() => void writer.dispose())

    const events: string[] = []
    const reindex = await heldReindex(root, dir)
    events.push('held')
    // Written while the rebuild is held: after the new file's cursor, so only a catch-up can bring it in.
    const late = writer.sessions.create({ id: 'late', cwd: '/work' })
    late.append('user/message', { text: 'a late otter' })
    await writer.sessions.dispose('late')
    for (let i = 0; i < 20; i++) {
      events.push(`start ${i}`)
      const listing = await dsh(['sessions', '--root', root, '--json'])
      expect(listing.code, listing.stderr).toBe(0)
      expect(listedIds(listing.stdout).sort()).toEqual([...ids('a', 120), 'late'].sort())
      events.push(`end ${i}`)
    }
    // The old index is still the one in place while the rebuild is held.
    expect(indexGeneration(root)).toBe(old)
    await reindex.release()
    events.push('released')
    const done = await reindex.exit
    events.push('reindexed')
    expect(done.code, done.stderr).toBe(0)
    expect(JSON.parse(done.stdout)).toMatchObject({ source: 'rescan', listed: 120, read: 120, corrupt: 0, failed: 0 })

    // Every listing started after the rebuild was held and ended before it was let go.
    expect(events).toEqual(['held', ...Array.from({ length: 20 }, (_, i) => [`start ${i}`, `end ${i}`]).flat(), 'released', 'reindexed'])
    // The new generation is in place and the old one is gone.
    expect(indexGeneration(root)).not.toBe(old)
    expect(existsSync(old)).toBe(false)

    // The writer notices the swap at its next operation and catches the new index up from its cursor.
    const report = await (writer.query as unknown as { reconcile(): Promise<Record<string, unknown>> }).reconcile()
    expect(report).toMatchObject({ source: 'feed', failed: 0 })
    await writer.dispose()
    const after = await dsh(['search', 'otter', '--root', root, '--json'])
    expect(after.code, after.stderr).toBe(0)
    expect(hitIds(after.stdout)).toEqual(['late'])
    // Indexed, not overlaid: the new file itself holds it, with nothing left pending.
    const db = new Database(indexGeneration(root), { readonly: true })
    try {
      expect(db.prepare("SELECT count(*) AS n FROM sessions WHERE id = 'late' AND revision IS NOT NULL").get()).toEqual({ n: 1 })
      expect(db.prepare("SELECT count(*) AS n FROM event_text WHERE event_text MATCH 'otter'").get()).toEqual({ n: 1 })
      expect(db.prepare('SELECT count(*) AS n FROM pending').get()).toEqual({ n: 0 })
    } finally {
      db.close()
    }
  })

  it('a rebuild that fails on a full disk leaves the old index answering and nothing behind', async () => {
    const dir = scratch()
    const mount = join(dir, 'disk')
    mkdirSync(mount, { mode: 0o700 })
    mountTmpfs(mount, '8m')
    cleanups.push(() => unmount(mount))
    const root = join(mount, 'root')
    await writeIndexed(root, 'a', 60, 'heron')
    await writeUnindexed(root, 'b', 10, 'otter')
    expect(fill(join(mount, 'filler'))).toBeGreaterThan(1024 * 1024)
    const before = snapshot(root)

    const failed = await dsh(['reindex', '--root', root, '--json'])
    expect(failed.code).toBe(1)
    expect(JSON.parse(failed.stdout)).toMatchObject({ error: { code: 'SESSION_QUERY_INDEX_UNAVAILABLE' } })
    expect(JSON.parse(failed.stdout).error.message).toContain('(full)')
    // Not a byte changed, no new generation, no WAL, no temporary link.
    expect(snapshot(root)).toEqual(before)
    expect(readdirSync(join(root, '.dsh')).filter((name) => name.startsWith('index'))).toHaveLength(2)

    // The old index keeps answering, and what changed since it comes from the logs.
    const listing = await dsh(['sessions', '--root', root, '--json'])
    expect(listing.code, listing.stderr).toBe(0)
    expect(listedIds(listing.stdout).sort()).toEqual([...ids('a', 60), ...ids('b', 10)].sort())
    for (const [word, expected] of [
      ['heron', ids('a', 60)],
      ['otter', ids('b', 10)],
    ] as const) {
      const search = await dsh(['search', word, '--root', root, '--json', '--limit', '100'])
      expect(search.code, search.stderr).toBe(0)
      expect(hitIds(search.stdout)).toEqual(expected)
    }
    const shown = await dsh(['show', sessionId('b', 1), '--root', root, '--json'])
    expect(shown.code, shown.stderr).toBe(0)
    expect(snapshot(root)).toEqual(before)
  })
})
