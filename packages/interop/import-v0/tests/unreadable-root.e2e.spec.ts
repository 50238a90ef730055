import { chmodSync, existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runNodeAs } from '@dsh/tooling/as-user'
import { beforeAll, describe, expect, it } from 'vitest'
import { projectKey, v0LogPath, writeV0Log } from '../src/index.js'
import { T0, tempDir, V0Builder } from './fixtures.js'

/**
 * Parts of a v0 root the importing user may not read. Root bypasses
 * permission checks, so the import runs as the unprivileged `nobody` user
 * (`runNodeAs`: we run as root here and in CI — elsewhere the test fails with
 * the reason, it is never skipped), from a world-readable copy of the worker
 * and the built package. Everything is world-readable except the entries
 * made private (mode 000, root's own): each is one failed row naming
 * IMPORT_V0_IO, and every other session still imports.
 */

const worker = join(dirname(fileURLToPath(import.meta.url)), 'workers', 'import-report.mjs')

beforeAll(() => {
  if (!existsSync(join(dirname(worker), '..', '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-import-v0...')
  if (process.getuid?.() !== 0)
    throw new Error('This test starts an import as the unprivileged user nobody with runuser: run it as root (CI does).')
})

interface Row {
  id?: string
  path: string
  status: string
  code?: string
  message?: string
}

function importAsNobody(from: string): { uid: number; imported?: number; failed?: number; sessions?: Row[]; thrown?: { code: string } } {
  const out = runNodeAs('nobody', worker, [from], { packages: ['@dsh/session-import-v0'], resolveFrom: dirname(worker) })
  return JSON.parse(out.trim().split('\n').at(-1) as string)
}

/** Makes `dir` (a temp dir, in the world-searchable temp root) and everything under it world-readable and searchable. */
function openUp(dir: string): void {
  chmodSync(dir, 0o755)
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    chmodSync(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644)
  }
}

async function session(root: string, id: string, cwd?: string): Promise<string> {
  const b = new V0Builder().turn(1, 'q', `answer of ${id}`)
  return writeV0Log(root, { id, createdAt: T0, delegationDepth: 0, ...(cwd === undefined ? {} : { cwd }) }, b.batches)
}

describe('a v0 root the importing user may not read in part', () => {
  it('reports an unreadable session directory, project directory and log as IMPORT_V0_IO rows and imports the rest', async () => {
    const base = tempDir('unreadable')
    const root = join(base, 'v0')
    await session(root, 'good-1')
    await session(root, 'good-2', '/srv/app')
    await session(root, 'locked-session')
    await session(root, 'in-locked-project', '/srv/locked')
    const sealed = await session(root, 'sealed-log')
    openUp(base)
    const lockedSession = dirname(v0LogPath(root, 'locked-session', undefined, 'zstd'))
    const lockedProject = join(root, projectKey('/srv/locked'))
    for (const path of [lockedSession, lockedProject, sealed]) chmodSync(path, 0o000)

    const result = importAsNobody(root)
    expect(result.uid).toBe(65534)
    expect(result.thrown).toBeUndefined()
    expect(result.imported).toBe(2)
    expect(result.failed).toBe(3)
    const rows = result.sessions as Row[]
    expect(rows.filter((r) => r.status !== 'failed').map((r) => r.id)).toEqual(['good-2', 'good-1'])
    const failed = rows.filter((r) => r.status === 'failed').sort((a, b) => (a.path < b.path ? -1 : 1))
    expect(failed).toEqual(
      [
        { id: undefined, path: lockedProject, status: 'failed', code: 'IMPORT_V0_IO', message: expect.stringContaining('EACCES') },
        { id: 'locked-session', path: lockedSession, status: 'failed', code: 'IMPORT_V0_IO', message: expect.stringContaining('EACCES') },
        { id: 'sealed-log', path: sealed, status: 'failed', code: 'IMPORT_V0_IO', message: expect.stringContaining('EACCES') },
      ].sort((a, b) => (a.path < b.path ? -1 : 1)),
    )
  })

  it('refuses a root it cannot list with IMPORT_V0_ROOT_INVALID naming the errno', async () => {
    const base = tempDir('unlistable')
    const root = join(base, 'v0')
    await session(root, 'good-1')
    openUp(base)
    chmodSync(root, 0o311)
    expect(importAsNobody(root).thrown).toEqual({ code: 'IMPORT_V0_ROOT_INVALID', message: expect.stringContaining('EACCES') })
  })
})
