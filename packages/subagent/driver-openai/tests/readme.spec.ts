import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, it, vi } from 'vitest'
import { answer, type ModelServer, startModelServer } from '../src/testing/model-server.js'

let server: ModelServer | undefined
const example = join(import.meta.dirname, '.readme-example.ts')
afterEach(async () => {
  vi.unstubAllEnvs()
  rmSync(example, { force: true })
  await server?.close()
})

it("runs the README's example against the local Chat Completions server", async () => {
  const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8')
  const code = /```ts\n([\s\S]*?)```/.exec(readme)![1]!
  expect(code).toContain("baseURL: 'http://127.0.0.1:11434/v1'")
  server = await startModelServer([answer(['Hello ', 'there, five words here.'])])
  writeFileSync(example, code.replace('http://127.0.0.1:11434/v1', server.baseURL))
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
    ['user/message', 'turn/start', 'step/start', 'assistant/chunk', 'assistant/chunk', 'assistant/message', 'step/end', 'turn/end'],
  ])
  expect(server.requests[0]!.body.model).toBe('qwen2.5:7b')
})
