import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'

/**
 * The tests that run a process as `nobody` (tests/eacces.e2e.spec.ts) pass
 * in a checkout inside a directory `nobody` may not traverse, such as a clone
 * in root's home (mode 0700): they run the process from a world-readable
 * copy (`@dsh/tooling/as-user`). Here the checkout is bind-mounted inside
 * such a directory (we run as root here and in CI; elsewhere the test fails
 * with the reason, it is never skipped) and the EACCES test runs from there.
 */
const here = dirname(fileURLToPath(import.meta.url))
const packageDir = dirname(here)
const repoRoot = join(packageDir, '..', '..', '..')
const worker = join(here, 'workers', 'unprivileged-reader.mjs')

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

describe('a checkout inside a directory nobody may not traverse', () => {
  it("runs the EACCES test, whose reader runs as nobody, though nobody cannot read the checkout's own copy of that reader", () => {
    if (process.getuid?.() !== 0)
      throw new Error('This test bind-mounts the checkout and starts processes as the user nobody: run it as root (CI does).')
    const { dir, cleanup } = tempDir('dsh-private-home-')
    cleanups.push(cleanup)
    chmodSync(dir, 0o700)
    const clone = join(dir, 'clone')
    mkdirSync(clone)
    execFileSync('mount', ['--bind', repoRoot, clone])
    cleanups.push(() => execFileSync('umount', ['-l', clone]))
    const clonedPackage = join(clone, relative(repoRoot, packageDir))

    // The failure this guards against: nobody cannot even reach a script inside the checkout.
    const direct = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, join(clonedPackage, relative(packageDir, worker))], {
      encoding: 'utf8',
    })
    expect(direct.status).not.toBe(0)
    // Node cannot stat it (EACCES on the way), so it reports the module as not found.
    expect(direct.stderr).toMatch(/Cannot find module|EACCES|permission denied/i)

    const run = spawnSync('npx', ['vitest', 'run', 'tests/eacces.e2e.spec.ts'], {
      cwd: clonedPackage,
      encoding: 'utf8',
      env: { ...process.env, DSH_TEST_LANE: 'e2e', NO_COLOR: '1', FORCE_COLOR: '0' },
    })
    const output = `${run.stdout}\n${run.stderr}`
    expect(run.status, output.slice(-4000)).toBe(0)
    expect(output).toMatch(/Tests\s+1 passed/)
  })
})
