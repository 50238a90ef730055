import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it, onTestFinished, vi } from 'vitest'
import { tempDir } from '../src/index.js'

it('the README example runs as written and removes its directory', async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1]
  expect(example).toContain("from '@dsh/test-kit'")
  // The example, verbatim apart from the import specifier (this package's source).
  const scratch = tempDir('dsh-kit-readme-')
  onTestFinished(scratch.cleanup)
  const file = join(scratch.dir, 'example.ts')
  writeFileSync(file, example!.replace("'@dsh/test-kit'", JSON.stringify(new URL('../src/index.ts', import.meta.url).pathname)))
  const log = vi.spyOn(console, 'log').mockImplementation(() => {})
  onTestFinished(() => log.mockRestore())
  await import(file)
  const [dir, id, turns, events, same] = log.mock.calls[0]!
  expect([id, same]).toEqual(['child-1', true])
  expect(turns).toBeGreaterThan(1)
  expect(events).toBeGreaterThan(turns as number)
  expect(() => readFileSync(dir as string)).toThrow(/ENOENT/)
})
