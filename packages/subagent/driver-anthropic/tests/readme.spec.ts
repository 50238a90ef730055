import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { afterEach, expect, it, vi } from 'vitest'
import { bodyOf, messagesURL } from './helpers.js'

let server: ModelServer | undefined
const example = join(import.meta.dirname, '.readme-example.ts')
afterEach(async () => {
  vi.unstubAllEnvs()
  rmSync(example, { force: true })
  await server?.close()
})

it("runs the README's example against the local Messages server", async () => {
  const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8')
  const code = /```ts\n([\s\S]*?)```/.exec(readme)![1]!
  expect(code).toContain("baseURL: 'https://api.anthropic.com'")
  server = await startModelServer([answer(['Hello ', 'there, five words here.'], undefined, ['Five words.'])])
  writeFileSync(example, code.replace('https://api.anthropic.com', messagesURL(server)))
  vi.stubEnv('DSH_API_KEY', 'sk-readme')
  const printed: unknown[][] = []
  const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void printed.push(args))
  try {
    await import(example)
  } finally {
    log.mockRestore()
  }
  expect(printed[0]).toEqual(['completed', 'Hello there, five words here.'])
  expect(printed[1]).toEqual([
    [
      'user/message',
      'turn/start',
      'step/start',
      'assistant/reasoning',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ],
  ])
  expect(bodyOf(server.requests[0])).toMatchObject({ model: 'claude-sonnet-5-5', thinking: { type: 'enabled', budget_tokens: 2048 } })
})
