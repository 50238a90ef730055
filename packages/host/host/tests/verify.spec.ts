import { cpSync, lstatSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { checkDerivedFiles, createHost, createQueryHost, type VerifiedLog, verifyRoot } from '../src/index.js'
import { scratchDir } from './support.js'

// `verifyRoot` against the catalog: a session the query index lists whose
// log is gone is a failing finding, on real roots written by a real host.

/** An id a terminal must never see raw: escape sequences, a newline and a bidi override. */
const HOSTILE = 'gone\x1b[2J\nforged\u202eabc'

/** A root written by a real host (index and cache made on dispose) with one message in each of `ids`. */
async function rootWith(root: string, ids: readonly string[]): Promise<void> {
  const host = await createHost({ root })
  try {
    for (const id of ids) {
      const session = host.sessions.create({ id, cwd: '/work' })
      session.append('user/message', { text: `hello from ${id}` })
      await host.sessions.flush(session)
    }
  } finally {
    await host.dispose()
  }
}

/** Where the root keeps the log of `id` (the backend's own answer). */
async function logPath(root: string, id: string): Promise<string> {
  const persistence = createJsonlPersistence({ root, readOnly: true })
  try {
    return persistence.logPath(id)
  } finally {
    await persistence.close()
  }
}

/**
 * Every entry under `dir` (links not followed) with its kind, mode, inode,
 * mtime and bytes (a link: its target): equal snapshots mean no file was
 * written, created, removed, renamed or had its mode changed.
 */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name)
    const stats = lstatSync(path)
    const kind = stats.isSymbolicLink() ? `link ${readlinkSync(path)}` : stats.isDirectory() ? 'dir' : `file ${stats.mtimeMs} ${stats.ino}`
    const bytes = stats.isFile() ? readFileSync(path).toString('base64') : ''
    out.set(name, `${kind} ${(stats.mode & 0o7777).toString(8)} ${bytes}`)
  }
  return out
}

/** The ids the catalog lists, as `dsh sessions` reads it (a read-only query host). */
async function catalogIds(root: string): Promise<string[]> {
  const host = await createQueryHost({ root, readOnly: true })
  try {
    return (await host.query.listSessions({})).records.map((r) => r.header.id).sort()
  } finally {
    await host.dispose()
  }
}

/** What the CLI counts against the exit code: a corrupt or unreadable (or missing) log. */
function failing(logs: readonly VerifiedLog[]): VerifiedLog[] {
  return logs.filter((log) => log.status === 'corrupt' || log.status === 'error')
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/

describe('verifyRoot: sessions the catalog lists whose log is missing', () => {
  it('reports a removed log and a removed session directory as SESSION_PERSISTENCE_NOT_FOUND errors, escaped, and changes no byte of the root', async () => {
    const root = join(scratchDir('dsh-verify-'), 'root')
    await rootWith(root, ['keep', HOSTILE, 'vanished'])
    const hostileLog = await logPath(root, HOSTILE)
    const vanishedLog = await logPath(root, 'vanished')
    rmSync(hostileLog)
    rmSync(dirname(vanishedLog), { recursive: true })
    // The premise: both are still in the catalog that `dsh sessions` shows.
    expect(await catalogIds(root)).toEqual(['keep', HOSTILE, 'vanished'].sort())
    const before = snapshot(root)
    expect([...before.keys()].some((name) => name.startsWith('.dsh/index'))).toBe(true)

    const report = await verifyRoot(root)
    // What `dsh verify` runs after the log check.
    const derived = await checkDerivedFiles(root)

    expect(snapshot(root)).toEqual(before)
    expect(derived.index.status).toBe('ok')
    expect(report.logs.find((log) => log.id === 'keep')).toEqual({ id: 'keep', status: 'ok', events: 1, tornBytes: 0 })
    const missing = failing(report.logs)
    expect(missing.map((log) => log.id).sort()).toEqual([HOSTILE, 'vanished'].sort())
    for (const log of missing) {
      expect(log).toMatchObject({ status: 'error', code: 'SESSION_PERSISTENCE_NOT_FOUND' })
      expect(log.message).toMatch(/^The query index lists session .*, but its log .* is missing .*dsh reindex/)
      expect(log.message).not.toMatch(UNSAFE)
    }
    expect(missing.find((log) => log.id === 'vanished')!.message).toContain(vanishedLog)
    // The exact id stays in `id`; the message names it escaped.
    expect(missing.find((log) => log.id === HOSTILE)!.message).toContain('"gone\\u001b[2J\\nforged\\u202eabc"')
    expect(report.logs).toHaveLength(3)
  })

  it('does not report a session deleted through dsh while the index on disk still holds it', async () => {
    const root = join(scratchDir('dsh-verify-'), 'root')
    await rootWith(root, ['keep', 'deleted'])
    // A host without the index deletes: the index file still has the row; the change feed names the delete.
    const host = await createHost({ root, query: 'memory', projectionCache: false })
    try {
      expect(await host.persistence.delete('deleted' as never)).toBe(true)
    } finally {
      await host.dispose()
    }
    expect(await catalogIds(root)).toEqual(['keep'])
    const report = await verifyRoot(root)
    expect(report.logs.map((log) => [log.id, log.status])).toEqual([['keep', 'ok']])
  })

  it('verifies a log that no catalog lists like any other, and does not fail for it (the index is derived)', async () => {
    const dir = scratchDir('dsh-verify-')
    const root = join(dir, 'root')
    const other = join(dir, 'other')
    await rootWith(root, ['keep'])
    await rootWith(other, ['stray'])
    // Copied in behind dsh's back: no change in the feed, so the index never hears of it.
    cpSync(dirname(await logPath(other, 'stray')), dirname(await logPath(root, 'stray')), { recursive: true })
    expect(await catalogIds(root)).toEqual(['keep'])
    const before = snapshot(root)
    const report = await verifyRoot(root)
    expect(snapshot(root)).toEqual(before)
    expect(report.logs.map((log) => [log.id, log.status]).sort()).toEqual([
      ['keep', 'ok'],
      ['stray', 'ok'],
    ])
    expect(failing(report.logs)).toEqual([])
  })
})
