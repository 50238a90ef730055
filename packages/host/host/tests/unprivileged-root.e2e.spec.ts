import { chmodSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MARKER_FILE } from '@dsh/session-persistence-jsonl'
import { tempDir } from '@dsh/test-kit'
import { runNodeAs } from '@dsh/tooling/as-user'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createHost } from '../src/index.js'

/**
 * A root the user cannot inspect or read (EACCES) is the caller's root to
 * change: every function of the package that takes a root answers
 * HOST_ROOT_INVALID naming the path, what cannot be read and the errno. Root
 * bypasses permission checks, so the functions run as the unprivileged
 * `nobody` user (`runuser`; we run as root here and in CI — elsewhere the
 * test fails with the reason, it is never skipped), from a world-readable
 * copy of the worker and the built package (`@dsh/tooling/as-user`).
 */
const worker = join(dirname(fileURLToPath(import.meta.url)), 'workers', 'unprivileged-opens.mjs')
const NOBODY = 65534
const FUNCTIONS = ['createHost', 'createQueryHost', 'verifyRoot', 'rebuildIndex', 'checkDerivedFiles']

interface Outcome {
  readonly opened?: true
  readonly code?: string | null
  readonly message?: string
  readonly details?: Record<string, unknown> | null
}

/** What each function of the package did with `root`, run as nobody. */
function opensAsNobody(root: string): Record<string, Outcome> {
  if (process.getuid?.() !== 0)
    throw new Error('This test starts the host as the unprivileged user nobody with runuser: run it as root (CI does).')
  const out = runNodeAs('nobody', worker, [root], { packages: ['@dsh/host'], resolveFrom: dirname(worker) })
  const { uid, results } = JSON.parse(out.trim().split('\n').at(-1)!) as { uid: number; results: Record<string, Outcome> }
  expect(uid).toBe(NOBODY)
  return results
}

/** A directory nobody may traverse (the temporary directory itself is private). */
function sharedDir(): string {
  const { dir, cleanup } = tempDir('dsh-host-unprivileged-')
  onTestFinished(cleanup)
  chmodSync(dir, 0o755)
  return dir
}

async function populate(root: string): Promise<void> {
  const host = await createHost({ root })
  try {
    const session = host.sessions.create({ cwd: '/work' })
    session.append('user/message', { text: 'hello' })
    await host.sessions.flush(session)
  } finally {
    await host.dispose()
  }
}

describe('a root the user may not use', () => {
  it('under a directory the user may not enter (EACCES on stat) is HOST_ROOT_INVALID naming the path and EACCES', async () => {
    const dir = sharedDir()
    const closed = join(dir, 'closed')
    mkdirSync(closed, { mode: 0o700 })
    const root = join(closed, 'root')
    await populate(root)
    const results = opensAsNobody(root)
    for (const name of [...FUNCTIONS, 'rootPermissionWarning']) {
      expect(results[name], name).toEqual({
        code: 'HOST_ROOT_INVALID',
        message: `The session root ${root} cannot be inspected (EACCES): this user may not enter a directory on its path. Run as a user who may, or pass a root this user can use.`,
        details: { root, code: 'EACCES' },
      })
    }
  })

  it('that the user may not read (mode 000) is HOST_ROOT_INVALID saying its marker cannot be read (EACCES), not that there is none', async () => {
    const root = join(sharedDir(), 'root')
    await populate(root)
    chmodSync(root, 0o000)
    const results = opensAsNobody(root)
    for (const name of FUNCTIONS) {
      expect(results[name], name).toEqual({
        code: 'HOST_ROOT_INVALID',
        message: `The session root ${root} cannot be opened: its persistence marker ${MARKER_FILE} cannot be read (EACCES). Check the owner and mode of the root (0700) and of its marker (a regular file, 0600), or run as their owner.`,
        details: { root, marker: join(root, MARKER_FILE), code: 'EACCES' },
      })
    }
  })
})
