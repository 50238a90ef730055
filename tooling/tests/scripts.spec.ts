import { execFile, spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { tempDir as kitTempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
// @ts-expect-error: a plain .mjs script without type declarations
import { checkPackage, importedPackages } from '../scripts/check-deps.mjs'

const scripts = join(import.meta.dirname, '..', 'scripts')
const cleanups: Array<() => void> = []
function tempDir(): string {
  const { dir, cleanup } = kitTempDir('dsh-tooling-')
  cleanups.push(cleanup)
  return dir
}
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('check-deps', () => {
  it('finds static, type-only, dynamic, re-exported and required imports; ignores builtins, relative paths, comments and method calls', () => {
    const text = [
      "import { a } from '@scope/one'",
      "import type { B } from '@scope/two/sub'",
      'import {\n  c,\n  d,\n} from "three"',
      "export * from 'four/deep/path'",
      "export { e } from '@scope/five'",
      "const six = await import('six')",
      "const seven = require('seven')",
      "declare module '@scope/eight' {}",
      "import 'side-effect'",
      "import { readFileSync } from 'node:fs'",
      "import { join } from 'path'",
      "import { local } from './local.js'",
      "// import { gone } from 'commented-out'",
      "/* import { gone } from 'block-commented' */",
      "const s = ctx.require('sessions')",
      "const text = 'this is not an import from here'",
    ].join('\n')
    expect([...importedPackages(text)].sort()).toEqual(
      ['@scope/eight', '@scope/five', '@scope/one', '@scope/two', 'four', 'seven', 'side-effect', 'six', 'three'].sort(),
    )
  })

  it('reports dependencies src never imports and imports src never declared; @types/x counts as used when x is imported', () => {
    const dir = tempDir()
    mkdirSync(join(dir, 'src', 'nested'), { recursive: true })
    writeFileSync(join(dir, 'src', 'index.ts'), "import { a } from 'used'\nimport pg from 'pg'\nexport * from './nested/b.js'\n")
    writeFileSync(join(dir, 'src', 'nested', 'b.ts'), "export const b = await import('undeclared-one')\n")
    const manifest = {
      name: 'fixture',
      dependencies: { used: '1', unused: '1', '@types/pg': '1' },
      peerDependencies: { pg: '8' },
    }
    expect(checkPackage({ dir, manifest })).toEqual({ dir, name: 'fixture', unused: ['unused'], undeclared: ['undeclared-one'] })
  })
})

describe('test-summary', () => {
  it('sums vitest lines per lane and dsh-check lines, and counts a test task that crashed before its summary, a file that failed in a hook and a failed build or typecheck task', () => {
    const dir = tempDir()
    const log = join(dir, 'ci.log')
    writeFileSync(
      log,
      [
        '@dsh/a:test:  Test Files  1 failed | 2 passed (3)',
        '@dsh/a:test:       Tests  3 passed | 1 failed (4)',
        // A beforeAll that timed out: its file failed, its tests were skipped, none failed.
        '@dsh/e:test:  Test Files  1 failed | 21 passed (22)',
        '@dsh/e:test:       Tests  221 passed | 3 skipped (224)',
        '\x1b[32m@dsh/b:test:\x1b[0m       Tests  5 passed (5)',
        '@dsh/b:test:       Tests  2 passed (2)',
        'dsh-check: lint passed',
        'dsh-check: consumer failed',
        '  Failed:    @dsh/c#test, @dsh/d#build',
        // turbo names a failed task again at the end of a later run: counted once.
        '  Failed:    @dsh/d#build, @dsh/f#typecheck',
        '',
      ].join('\n'),
    )
    const result = spawnSync(process.execPath, [join(scripts, 'test-summary.mjs'), log], { encoding: 'utf8' })
    const lines = result.stdout.trim().split('\n')
    expect(lines.at(-1)).toBe('232 passed, 6 failed')
    expect(result.stdout).toContain('test task crashed before its summary: @dsh/c')
    expect(result.stdout).toContain('task failed: @dsh/d#build')
    expect(result.stdout).toContain('task failed: @dsh/f#typecheck')
  })
})

describe('under-load', () => {
  it('runs the command N times with busy processes, reports each run, and kills the hogs', async () => {
    const marker = `dsh-under-load-test-${process.pid}`
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        join(scripts, 'under-load.mjs'),
        '--runs',
        '2',
        '--hogs',
        '1',
        '--',
        process.execPath,
        '-e',
        `console.log('7 passed, 0 failed') // ${marker}`,
      ],
      { timeout: 120_000 },
    )
    expect(stdout).toMatch(/run 1: exit 0, [\d.]+ min, 7 passed, 0 failed/)
    expect(stdout).toMatch(/run 2: exit 0, [\d.]+ min, 7 passed, 0 failed/)
    const pids = [...stdout.matchAll(/^under-load: hog pids ([\d ]+)$/gm)].flatMap((m) => m[1]!.split(' ').map(Number))
    expect(pids).toHaveLength(2)
    for (const pid of pids) expect(() => process.kill(pid, 0), `hog ${pid} still alive`).toThrow()
  })

  it('exits non-zero when a run fails', async () => {
    const failed = await promisify(execFile)(
      process.execPath,
      [join(scripts, 'under-load.mjs'), '--hogs', '1', '--', process.execPath, '-e', 'process.exit(3)'],
      {
        timeout: 120_000,
      },
    ).then(
      () => undefined,
      (error: { code: number; stdout: string }) => error,
    )
    expect(failed?.code).toBe(1)
    expect(failed?.stdout).toMatch(/run 1: exit 3/)
  })
})
