import { existsSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { isDshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { checkDerivedFiles, createHost, createQueryHost, rebuildIndex, rootPermissionWarning, verifyRoot } from '../src/index.js'
import { failureOf, scratchDir } from './support.js'

// A root whose path cannot even be inspected (stat fails with something other
// than "it does not exist") is a root the caller must change: the host's typed
// HOST_ROOT_INVALID naming the path and the errno, never a raw Node error (the
// CLI prints an untyped error as an internal bug). EACCES needs an
// unprivileged user: tests/unprivileged-root.e2e.spec.ts.

/** Every function of the package that takes a root, each as a caller would use it. */
const OPENS: ReadonlyArray<readonly [string, (root: string) => unknown]> = [
  ['createHost', (root) => createHost({ root })],
  ['createHost read-only', (root) => createHost({ root, readOnly: true })],
  ['createHost requireExisting', (root) => createHost({ root, requireExisting: true })],
  ['createQueryHost read-only', (root) => createQueryHost({ root, readOnly: true })],
  ['verifyRoot', (root) => verifyRoot(root)],
  ['rebuildIndex', (root) => rebuildIndex({ root })],
  ['checkDerivedFiles', (root) => checkDerivedFiles(root)],
  ['rootPermissionWarning', (root) => rootPermissionWarning(root)],
]

async function expectRootInvalid(root: string, errno: string, remedy: RegExp): Promise<void> {
  for (const [name, open] of OPENS) {
    const error = await failureOf(() => open(root))
    expect(isDshError(error, 'HOST_ROOT_INVALID'), `${name}: expected HOST_ROOT_INVALID, got ${String(error)}`).toBe(true)
    const { message, details } = error as { message: string; details: { root: string; code: string } }
    expect(message, name).toContain(`(${errno})`)
    expect(message, name).toMatch(remedy)
    expect(details, name).toEqual({ root, code: errno })
  }
}

describe('a root whose path cannot be inspected is HOST_ROOT_INVALID naming the errno', () => {
  it('a symbolic-link loop (ELOOP), as the root and on its path', async () => {
    const dir = scratchDir('dsh-uninspectable-')
    symlinkSync(join(dir, 'b'), join(dir, 'a'))
    symlinkSync(join(dir, 'a'), join(dir, 'b'))
    await expectRootInvalid(join(dir, 'a'), 'ELOOP', /symbolic-link loop/)
    await expectRootInvalid(join(dir, 'a', 'root'), 'ELOOP', /symbolic-link loop/)
    const error = await failureOf(() => createHost({ root: join(dir, 'a') }))
    expect((error as Error).message).toContain(`The session root ${join(dir, 'a')} cannot be inspected (ELOOP)`)
  })

  it('a path longer than the system allows (ENAMETOOLONG): the message shows a bounded start of it and creates nothing', async () => {
    const dir = scratchDir('dsh-uninspectable-')
    const root = join(dir, 'x'.repeat(5000))
    await expectRootInvalid(root, 'ENAMETOOLONG', /Pass a shorter path/)
    const error = (await failureOf(() => createHost({ root }))) as Error
    expect(error.message).toContain(`The session root ${dir}/xxx`)
    expect(error.message).toContain('…')
    expect(error.message.length).toBeLessThan(600)
    expect(existsSync(dir)).toBe(true)
  })

  it('escapes control characters in the path it names', async () => {
    const dir = scratchDir('dsh-uninspectable-')
    const hostile = join(dir, 'loop\x1b[2J\u202e')
    symlinkSync(hostile, hostile)
    const error = (await failureOf(() => verifyRoot(hostile))) as Error
    expect(isDshError(error, 'HOST_ROOT_INVALID')).toBe(true)
    expect(error.message).toContain(`${dir}/loop\\x1b[2J\\u202e cannot be inspected (ELOOP)`)
  })
})
