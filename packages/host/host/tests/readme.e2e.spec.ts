import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, expect, it } from 'vitest'

// The README's example, extracted and run by Node against the built package
// (turbo builds before tests): the file sits inside the package, so
// `import '@dsh/host'` resolves through the package's own `exports`.
const pkg = join(import.meta.dirname, '..')
const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function readmeExample(readme: string): string {
  const match = /## Example\n\n```js\n([\s\S]*?)```/.exec(readme)
  if (match?.[1] === undefined) throw new Error('README.md has no ```js block under "## Example"')
  return match[1]
}

it('the README example runs and prints the catalog row', async () => {
  const code = readmeExample(readFileSync(join(pkg, 'README.md'), 'utf8'))
  expect(code).toContain("from '@dsh/host'")
  const dir = mkdtempSync(join(tmpdir(), 'dsh-readme-'))
  dirs.push(dir)
  const script = join(pkg, `.readme-example-${process.pid}.mjs`)
  writeFileSync(script, code)
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [script, join(dir, 'sessions')], { timeout: 120_000 })
    const rows = JSON.parse(stdout.trim()) as unknown[]
    expect(rows).toEqual([expect.objectContaining({ kind: 'child', mode: 'continuable', label: 'helper', activity: 'inactive' })])
  } finally {
    rmSync(script, { force: true })
  }
}, 120_000)
