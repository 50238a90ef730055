import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, it, vi } from 'vitest'
import { parseAgentDefinition } from '../src/index.js'

const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8')
const example = join(import.meta.dirname, '.readme-example.mjs')
afterEach(() => rmSync(example, { force: true }))

it("parses the README's sample definition with every key it shows", () => {
  const text = /```text\n([\s\S]*?)```/.exec(readme)![1]!
  const definition = parseAgentDefinition(text, { file: '/agents/reviewer.md', scope: 'root', expectedName: 'reviewer' })
  expect(definition).toMatchObject({
    name: 'reviewer',
    provider: 'anthropic',
    tools: ['read_file', 'grep', 'report'],
    budgets: { maxTokens: 200000, maxCostUsd: 1.5, maxWallMs: 600000, maxTurns: 8 },
    instructions: 'You review diffs. Point at the line, say why it is wrong.',
  })
})

it("runs the README's example and prints what its comments say", async () => {
  const code = /```js\n([\s\S]*?)```/.exec(readme)![1]!
  writeFileSync(example, code)
  const printed: unknown[][] = []
  const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void printed.push(args))
  try {
    await import(example)
  } finally {
    log.mockRestore()
  }
  expect(printed[0]).toEqual(['project', ['grep'], { maxTurns: 3 }, 'Only look under tests/.'])
  expect(printed[1]![0]).toBe('AGENT_DEFINITION_INVALID')
  expect(printed[1]![1]).toMatch(/typo\.md:4: unknown key 'modle'/)
})
