import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { expect, it, onTestFinished, vi } from 'vitest'

it('the README renderers example runs as written and prints what its comments say', async () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  const section = readme.slice(readme.indexOf('## Renderers'))
  const example = /```ts\n([\s\S]*?)```/.exec(section)?.[1]
  expect(example).toContain("from '@dsh/session-context'")
  // Written beside the tests so its imports resolve like theirs; this package's own name maps to its source.
  const file = new URL(`./.readme-example-${process.pid}.ts`, import.meta.url)
  writeFileSync(file, (example as string).replace("'@dsh/session-context'", "'../../src/index.js'"))
  onTestFinished(() => rmSync(file, { force: true }))
  const log = vi.spyOn(console, 'log').mockImplementation(() => {})
  onTestFinished(() => log.mockRestore())
  await import(file.pathname)
  expect(log.mock.calls).toEqual([[['user', 'assistant', 'tool']], ['resp_1', ['function_call_output']], [3, 4]])
})
