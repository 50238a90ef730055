import { execFileSync } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { importV0, listV0Logs, projectKey, scanV0Root, v0LogPath, writeV0Log } from '../src/index.js'
import { T0, tempDir, V0Builder } from './fixtures.js'

// Entries of a v0 root where the layout keeps a project directory, a session
// directory or a log, but that are not one (links are never followed): each
// is one failed row, so a run never reports "nothing failed" over sessions it
// could not see. Entries the layout does not name are left alone.

async function session(root: string, id: string, cwd?: string): Promise<string> {
  const b = new V0Builder().turn(1, 'q', `answer of ${id}`)
  return writeV0Log(root, { id, createdAt: T0, delegationDepth: 0, ...(cwd === undefined ? {} : { cwd }) }, b.batches)
}

describe('entries of a v0 root that stand where a session belongs', () => {
  it('reports linked project and session directories, linked and special logs as IMPORT_V0_IO, never following them', async () => {
    const root = tempDir('entries')
    const outside = tempDir('outside')
    // Real sessions outside the root, for the links to point at.
    const outsideLog = await session(outside, 'linked-log')
    await session(outside, 'linked-session')
    await session(outside, 'in-linked-project', '/srv/linked')
    await session(root, 'good')

    const linkedProject = join(root, projectKey('/srv/linked'))
    symlinkSync(join(outside, projectKey('/srv/linked')), linkedProject)
    const linkedSession = dirname(v0LogPath(root, 'linked-session', undefined, 'zstd'))
    symlinkSync(dirname(v0LogPath(outside, 'linked-session', undefined, 'zstd')), linkedSession)
    const linkedLog = v0LogPath(root, 'linked-log', undefined, 'zstd')
    mkdirSync(dirname(linkedLog), { recursive: true })
    symlinkSync(outsideLog, linkedLog)
    const fifo = v0LogPath(root, 'fifo', undefined, 'none')
    mkdirSync(dirname(fifo), { recursive: true })
    execFileSync('mkfifo', [fifo])
    const dirLog = v0LogPath(root, 'dir-log', undefined, 'zstd')
    mkdirSync(dirLog, { recursive: true })

    // What the layout does not name stays unreported: other files in the root, a project or a session
    // directory (the harness keeps its own artifacts beside a log), a directory that is not a project's.
    writeFileSync(join(root, 'README.txt'), 'notes')
    symlinkSync(outside, join(root, 'latest'))
    mkdirSync(join(root, '.dsh-export-abc'))
    writeFileSync(join(root, '_no-cwd', 'notes.txt'), 'notes')
    execFileSync('mkfifo', [join(root, '_no-cwd', 'pipe~')])
    writeFileSync(join(dirname(v0LogPath(root, 'good', undefined, 'zstd')), 'session.jsonl.zstd.1a2b.tmp'), 'partial')

    const report = await importV0({ from: root, dryRun: true })
    expect(report.imported).toBe(1)
    expect(report.failed).toBe(5)
    const failed = report.sessions.filter((s) => s.status === 'failed').map((s) => ({ id: s.id, path: s.path, code: s.reason?.code }))
    expect(failed).toEqual([
      { id: undefined, path: linkedProject, code: 'IMPORT_V0_IO' },
      { id: 'dir-log', path: dirLog, code: 'IMPORT_V0_IO' },
      { id: 'fifo', path: fifo, code: 'IMPORT_V0_IO' },
      { id: 'linked-log', path: linkedLog, code: 'IMPORT_V0_IO' },
      { id: 'linked-session', path: linkedSession, code: 'IMPORT_V0_IO' },
    ])
    const message = (path: string) => report.sessions.find((s) => s.path === path)?.reason?.message
    expect(message(linkedProject)).toMatch(/is a symbolic link where the v0 layout keeps a project directory; links are not followed/)
    expect(message(linkedSession)).toMatch(/is a symbolic link where the v0 layout keeps a session directory/)
    expect(message(linkedLog)).toMatch(/is a symbolic link, not a regular file/)
    expect(message(fifo)).toMatch(/is a FIFO, not a regular file/)
    expect(message(dirLog)).toMatch(/is a directory, not a regular file/)

    const scan = await scanV0Root(root)
    expect(scan.faults.map((f) => f.error.details)).toEqual([
      { path: linkedProject, reason: 'symlink' },
      { path: dirLog, reason: 'not-a-file' },
      { path: fifo, reason: 'not-a-file' },
      { path: linkedLog, reason: 'symlink' },
      { path: linkedSession, reason: 'symlink' },
    ])
    expect((await listV0Logs(root)).map((e) => e.dirId)).toEqual(['good'])
  })

  it('a root whose only entries are such places fails every one of them: nothing imported, nothing called fine', async () => {
    const root = tempDir('only-links')
    const outside = tempDir('outside-only')
    const log = await session(outside, 'elsewhere')
    const linked = v0LogPath(root, 'elsewhere', undefined, 'zstd')
    mkdirSync(dirname(linked), { recursive: true })
    symlinkSync(log, linked)
    const report = await importV0({ from: root, dryRun: true })
    expect({ imported: report.imported, failed: report.failed }).toEqual({ imported: 0, failed: 1 })
    expect(report.sessions[0]).toMatchObject({ id: 'elsewhere', path: linked, status: 'failed', reason: { code: 'IMPORT_V0_IO' } })
  })
})
