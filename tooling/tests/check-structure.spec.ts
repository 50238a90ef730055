import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

// The structure checker on small fake workspaces: a clean one passes, and each
// planted violation fails the run naming the file, the line and the rule. The
// last test is the acceptance: the repository itself has no violation.

const script = join(import.meta.dirname, '..', 'scripts', 'check-structure.mjs')
const repoRoot = join(import.meta.dirname, '..', '..')

type Violation = { rule: string; file: string; line: number; message: string; fix: string; kind?: string; cycle?: string[] }

const manifest = (name: string, extra: Record<string, unknown> = {}) =>
  `${JSON.stringify({ name, version: '0.0.0', type: 'module', exports: { '.': './src/index.ts' }, ...extra }, null, 2)}\n`

// core: low, peer (peer imports low); host: high (imports low); apps: cli;
// bench and tooling outside the layering.
const base: Record<string, string> = {
  'pnpm-workspace.yaml': 'packages:\n  - packages/*/*\n  - apps/*\n  - bench\n  - tooling\n',
  'packages/core/low/package.json': manifest('@fx/low', { exports: { '.': './src/index.ts', './testing': './src/testing.ts' } }),
  'packages/core/low/src/index.ts': "export { inner } from './inner.js'\n",
  'packages/core/low/src/inner.ts': 'export const inner = 1\n',
  'packages/core/low/src/testing.ts': "import { inner } from './inner.js'\nexport const fixture = inner + 1\n",
  'packages/core/peer/package.json': manifest('@fx/peer', { dependencies: { '@fx/low': 'workspace:*' } }),
  'packages/core/peer/src/index.ts': "import { inner } from '@fx/low'\nexport const peer = inner\n",
  'packages/host/high/package.json': manifest('@fx/high', { dependencies: { '@fx/low': 'workspace:*' } }),
  'packages/host/high/src/index.ts':
    "import { inner } from '@fx/low'\nimport { fixture } from '@fx/low/testing'\nexport const high = inner + fixture\n",
  'packages/host/high/tests/high.spec.ts': "import { high } from '../src/index.js'\nexport const seen = high\n",
  'apps/cli/package.json': manifest('@fx/cli', { dependencies: { '@fx/high': 'workspace:*' } }),
  'apps/cli/src/index.ts': "import { high } from '@fx/high'\nconsole.log(high)\n",
  'bench/package.json': manifest('@fx/bench', { dependencies: { '@fx/high': 'workspace:*', '@fx/low': 'workspace:*' } }),
  'bench/src/run.ts': "import { high } from '@fx/high'\nimport { fixture } from '@fx/low/testing'\nconsole.log(high, fixture)\n",
  'tooling/package.json': manifest('@fx/tooling', { exports: { './helper': './helper.ts' } }),
  'tooling/helper.ts': 'export const helper = 3\n',
  'tooling/vitest.config.ts': "export { default } from '../elsewhere/preset.ts'\n",
}

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A fake workspace: the base files with `changes` laid over them (a null deletes a file). */
function workspace(changes: Record<string, string | null> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'dsh-structure-'))
  dirs.push(root)
  for (const [path, text] of Object.entries({ ...base, ...changes })) {
    if (text === null) continue
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

function check(root: string): { status: number | null; violations: Violation[] } {
  const result = spawnSync(process.execPath, [script, root, '--json'], { encoding: 'utf8' })
  if (result.stderr !== '') throw new Error(`check-structure wrote to stderr: ${result.stderr}`)
  return { status: result.status, violations: (JSON.parse(result.stdout) as { violations: Violation[] }).violations }
}

const lines = (n: number) => `${Array.from({ length: n }, (_, i) => `export const v${i} = ${i}`).join('\n')}\n`

describe('check-structure', () => {
  it('passes a clean workspace (layers respected, exports used, no loops, short files)', () => {
    expect(check(workspace())).toEqual({ status: 0, violations: [] })
  })

  it('fails a dependencies entry on a later layer, at its package.json line', () => {
    const peer = JSON.parse(base['packages/core/peer/package.json']!)
    peer.dependencies['@fx/high'] = 'workspace:*'
    const { status, violations } = check(workspace({ 'packages/core/peer/package.json': `${JSON.stringify(peer, null, 2)}\n` }))
    expect(status).toBe(1)
    expect(violations).toHaveLength(1)
    expect(violations[0]).toMatchObject({ rule: 'upward-import', file: 'packages/core/peer/package.json', line: 10 })
    expect(violations[0]!.message).toContain('@fx/peer (layer core) depends on @fx/high (host)')
    expect(violations[0]!.fix).toMatch(/service injected at activation/)
  })

  it('fails a src import of a later layer even when the manifest does not declare it', () => {
    const { status, violations } = check(
      workspace({
        'packages/core/peer/src/index.ts':
          "import { inner } from '@fx/low'\n\nimport type { high } from '@fx/high'\nexport const peer = inner\n",
      }),
    )
    expect(status).toBe(1)
    expect(violations).toEqual([
      expect.objectContaining({
        rule: 'upward-import',
        file: 'packages/core/peer/src/index.ts',
        line: 3,
        message: expect.stringContaining("'@fx/high'"),
      }),
    ])
  })

  it('fails layered src that imports tooling or bench (they sit outside the layering)', () => {
    const { violations } = check(workspace({ 'packages/host/high/src/tool.ts': "export { helper } from '@fx/tooling/helper'\n" }))
    expect(violations).toEqual([
      expect.objectContaining({
        rule: 'upward-import',
        file: 'packages/host/high/src/tool.ts',
        line: 1,
        message: expect.stringContaining('outside the layering'),
      }),
    ])
  })

  it('lets tests and devDependencies reach a later layer, and bench and tooling import any public face', () => {
    const peer = JSON.parse(base['packages/core/peer/package.json']!)
    peer.devDependencies = { '@fx/high': 'workspace:*', '@fx/tooling': 'workspace:*' }
    const root = workspace({
      'packages/core/peer/package.json': `${JSON.stringify(peer, null, 2)}\n`,
      'packages/core/peer/tests/peer.spec.ts':
        "import { high } from '@fx/high'\nimport { helper } from '@fx/tooling/helper'\nexport const both = high + helper\n",
      'tooling/scripts/use.mjs': "import { cli } from '@fx/cli'\nimport { high } from '@fx/high'\nconsole.log(cli, high)\n",
    })
    expect(check(root)).toEqual({ status: 0, violations: [] })
  })

  it("fails an import of another package's internals (src/, dist/, an unexported subpath) and a relative path out of the package", () => {
    const { status, violations } = check(
      workspace({
        'packages/host/high/src/deep.ts': "export { inner } from '@fx/low/src/inner.js'\n",
        'bench/src/dist.ts': "import { inner } from '@fx/low/dist/index.js'\nconsole.log(inner)\n",
        'apps/cli/src/sub.ts': "\nconst lazy = await import('@fx/high/helpers')\nexport { lazy }\n",
        'packages/host/high/tests/escape.spec.ts': "import { inner } from '../../../core/low/src/inner.js'\nexport const x = inner\n",
      }),
    )
    expect(status).toBe(1)
    const seen = violations.map((v) => [v.rule, `${v.file}:${v.line}`])
    expect(seen).toEqual([
      ['internal-import', 'apps/cli/src/sub.ts:2'],
      ['internal-import', 'bench/src/dist.ts:1'],
      ['internal-import', 'packages/host/high/src/deep.ts:1'],
      ['internal-import', 'packages/host/high/tests/escape.spec.ts:1'],
    ])
    expect(violations[2]!.message).toBe(
      "'@fx/low/src/inner.js' is an internal of @fx/low, not one of its exports ('@fx/low', '@fx/low/testing')",
    )
    expect(violations[3]!.message).toContain("leaves @fx/high's folder (packages/host/high/) and reaches packages/core/low/src/inner.js")
  })

  it('fails two files that import each other, type-only imports included', () => {
    const { status, violations } = check(
      workspace({
        'packages/core/low/src/a.ts': "import type { B } from './b.js'\nexport type A = { b?: B }\n",
        'packages/core/low/src/b.ts': "\nimport type { A } from './a.js'\nexport type B = { a?: A }\n",
      }),
    )
    expect(status).toBe(1)
    expect(violations).toEqual([
      expect.objectContaining({
        rule: 'file-cycle',
        file: 'packages/core/low/src/a.ts',
        line: 1,
        cycle: ['packages/core/low/src/a.ts', 'packages/core/low/src/b.ts'],
        message:
          'import cycle: packages/core/low/src/a.ts:1 (type-only) -> packages/core/low/src/b.ts:2 (type-only) -> packages/core/low/src/a.ts',
      }),
    ])
  })

  it('fails a longer loop through a re-export, a dynamic import and a folder index, once', () => {
    const { violations } = check(
      workspace({
        'packages/host/high/src/x.ts': "export * from './y.js'\n",
        'packages/host/high/src/y.ts': "export const load = () => import('./z/index.js')\n",
        'packages/host/high/src/z/index.ts': "import { load } from '..//x'\nexport const again = load\n",
        'packages/host/high/src/self.ts': "export const me = 1\nexport * as self from './self.js'\n",
      }),
    )
    expect(violations.map((v) => [v.rule, v.file, v.cycle])).toEqual([
      ['file-cycle', 'packages/host/high/src/self.ts', ['packages/host/high/src/self.ts']],
      [
        'file-cycle',
        'packages/host/high/src/x.ts',
        ['packages/host/high/src/x.ts', 'packages/host/high/src/y.ts', 'packages/host/high/src/z/index.ts'],
      ],
    ])
  })

  it('fails packages that depend on each other, by manifest or by any import', () => {
    const low = JSON.parse(base['packages/core/low/package.json']!)
    low.devDependencies = { '@fx/peer': 'workspace:*' }
    const byManifest = check(workspace({ 'packages/core/low/package.json': `${JSON.stringify(low, null, 2)}\n` }))
    expect(byManifest.status).toBe(1)
    expect(byManifest.violations).toEqual([
      expect.objectContaining({ rule: 'package-cycle', file: 'packages/core/low/package.json', cycle: ['@fx/low', '@fx/peer'] }),
    ])
    expect(byManifest.violations[0]!.message).toBe(
      'package cycle: @fx/low -> @fx/peer (packages/core/low/package.json:10 (devDependencies)); @fx/peer -> @fx/low (packages/core/peer/package.json:9 (dependencies))',
    )
    const byImport = check(workspace({ 'packages/core/low/tests/low.spec.ts': "import { peer } from '@fx/peer'\nexport const p = peer\n" }))
    expect(byImport.violations.map((v) => [v.rule, v.cycle])).toEqual([['package-cycle', ['@fx/low', '@fx/peer']]])
    expect(byImport.violations[0]!.message).toContain('@fx/low -> @fx/peer (packages/core/low/tests/low.spec.ts:1)')
  })

  it('fails a source or test file over 600 lines, saying which; 600 lines pass', () => {
    const { status, violations } = check(
      workspace({
        'packages/core/low/src/long.ts': lines(601),
        'packages/core/low/src/limit.ts': lines(600),
        'packages/host/high/tests/long.spec.ts': lines(650),
        'tooling/scripts/long.mjs': lines(700),
        'bench/src/limit.ts': lines(600),
      }),
    )
    expect(status).toBe(1)
    expect(violations.map((v) => [v.rule, v.kind, `${v.file}:${v.line}`, v.message])).toEqual([
      ['file-length', 'source', 'packages/core/low/src/long.ts:601', 'source file has 601 lines (limit 600)'],
      ['file-length', 'test', 'packages/host/high/tests/long.spec.ts:601', 'test file has 650 lines (limit 600)'],
      ['file-length', 'source', 'tooling/scripts/long.mjs:601', 'source file has 700 lines (limit 600)'],
    ])
  })

  it('fails a package folder that is not a layer, and a file the parser rejects', () => {
    const { violations } = check(
      workspace({
        'packages/misc/odd/package.json': manifest('@fx/odd'),
        'packages/misc/odd/src/index.ts': 'export const odd = 1\n',
        'packages/core/low/src/broken.ts': 'export const = 1\n',
      }),
    )
    expect(violations.map((v) => [v.rule, v.file])).toEqual([
      ['unparsable', 'packages/core/low/src/broken.ts'],
      ['unknown-layer', 'packages/misc/odd/package.json'],
    ])
  })

  it('prints each violation as file:line, rule and fix, then a count; exits 2 without a workspace root', () => {
    const root = workspace({
      'packages/core/low/src/a.ts': "import { b } from './b.js'\nexport const a = 1\n",
      'packages/core/low/src/b.ts': "import { a } from './a.js'\nexport const b = a\n",
    })
    const text = spawnSync(process.execPath, [script, root], { encoding: 'utf8' })
    expect(text.status).toBe(1)
    expect(text.stdout).toContain(
      'packages/core/low/src/a.ts:1  [file-cycle] import cycle: packages/core/low/src/a.ts:1 -> packages/core/low/src/b.ts:1 -> packages/core/low/src/a.ts\n    fix: ',
    )
    expect(text.stdout.trim().split('\n').at(-1)).toBe('check-structure: 6 packages, 11 files, 1 violation (file-cycle 1)')
    const nowhere = spawnSync(process.execPath, [script, join(root, 'packages')], { encoding: 'utf8' })
    expect(nowhere.status).toBe(2)
    expect(nowhere.stderr).toContain('holds no pnpm-workspace.yaml')
  })

  it('finds no violation in this repository', () => {
    const { status, violations } = check(repoRoot)
    expect(violations.map((v) => `${v.file}:${v.line} [${v.rule}${v.kind ? `, ${v.kind}` : ''}] ${v.message}`)).toEqual([])
    expect(status).toBe(0)
  })
})
