import { execFile } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { tempDir } from '@dsh/test-kit'
import { expect, it, onTestFinished } from 'vitest'

// The README examples, extracted and run by Node against the built package
// (turbo builds before tests): the script sits inside the package, so
// `import '@dsh/host'` resolves through the package's own `exports`. CI's
// consumer test (tooling/scripts/consumer-test.mjs) runs the root README's
// example again from packed tarballs outside the workspace.
const pkg = join(import.meta.dirname, '..')

/** The first ```js block after `heading`. */
function exampleUnder(markdown: string, heading: string): string {
  const at = markdown.indexOf(`\n${heading}\n`)
  const match = at < 0 ? null : /```js\n([\s\S]*?)```/.exec(markdown.slice(at))
  if (match?.[1] === undefined) throw new Error(`no \`\`\`js block under '${heading}'`)
  return match[1]
}

async function runExample(code: string): Promise<unknown[]> {
  expect(code).toContain("from '@dsh/host'")
  const { dir, cleanup } = tempDir('dsh-readme-')
  onTestFinished(cleanup)
  const script = join(pkg, `.readme-example-${process.pid}.mjs`)
  writeFileSync(script, code)
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [script, join(dir, 'sessions')], { timeout: 120_000 })
    return JSON.parse(stdout.trim()) as unknown[]
  } finally {
    rmSync(script, { force: true })
  }
}

it("this package's README example runs and prints the catalog row", async () => {
  const rows = await runExample(exampleUnder(readFileSync(join(pkg, 'README.md'), 'utf8'), '## Example'))
  expect(rows).toEqual([expect.objectContaining({ kind: 'child', mode: 'continuable', label: 'helper', activity: 'inactive' })])
})

it("the repository README's composition example runs and prints the catalog row", async () => {
  const rows = await runExample(exampleUnder(readFileSync(join(pkg, '..', '..', '..', 'README.md'), 'utf8'), '## Compose it yourself'))
  expect(rows).toEqual([expect.objectContaining({ kind: 'child', mode: 'one-shot', label: 'summarizer', activity: 'inactive' })])
})
