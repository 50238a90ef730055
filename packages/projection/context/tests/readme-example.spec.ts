import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '@dsh/test-kit'
import { expect, it, onTestFinished, vi } from 'vitest'

it('the README example runs as written', async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1] as string
  expect(example).toContain("from '@dsh/session-context'")
  // The example, verbatim apart from the import specifiers (package sources).
  const sources: Record<string, string> = {
    '@dsh/session-context': '../src/index.ts',
    '@dsh/context': '../node_modules/@dsh/context/src/index.ts',
    '@dsh/session': '../node_modules/@dsh/session/src/index.ts',
    '@dsh/session-projection': '../node_modules/@dsh/session-projection/src/index.ts',
  }
  let code = example
  for (const [name, path] of Object.entries(sources))
    code = code.replace(`'${name}'`, JSON.stringify(new URL(path, import.meta.url).pathname))
  const scratch = tempDir('dsh-context-readme-')
  onTestFinished(scratch.cleanup)
  const file = join(scratch.dir, 'example.ts')
  writeFileSync(file, code)
  const log = vi.spyOn(console, 'log').mockImplementation(() => {})
  onTestFinished(() => log.mockRestore())
  await import(file)
  expect(log.mock.calls).toEqual([[['user', 'assistant', 'tool']], ['example-model', 'tool-calls'], [1, 'k1'], [2]])
})
