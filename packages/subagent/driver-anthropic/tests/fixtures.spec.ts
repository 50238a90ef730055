import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { answer, type ModelServer, startModelServer } from '@dsh/driver-openai/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { runAgent } from '../src/index.js'
import { requests as typedRequests } from './fixtures/requests.js'
import { addTool, newStore, testClient } from './helpers.js'

/**
 * The request bodies the test server recorded for one conversation (system
 * prompt, thinking, a tool step with a failing call, the answer, a second
 * turn), stored as `fixtures/requests.json`. `fixtures/requests.ts` holds
 * the same bodies as a typed module that `tsc` checks against the SDK's
 * request type (`satisfies MessageCreateParamsStreaming[]`). A run compares
 * the recorded bodies with both; `DSH_UPDATE_FIXTURES=1` rewrites both
 * instead (then review the diff and run the typecheck).
 */
const UPDATE = process.env.DSH_UPDATE_FIXTURES === '1'
const JSON_FILE = new URL('./fixtures/requests.json', import.meta.url)
const TS_FILE = new URL('./fixtures/requests.ts', import.meta.url)

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

function typedModule(bodies: unknown): string {
  return [
    '// The bodies of fixtures/requests.json as a typed module: `tsc --noEmit` checks them against the',
    "// SDK's request type. Written by fixtures.spec.ts with DSH_UPDATE_FIXTURES=1; fixtures.spec.ts checks they are equal.",
    "import type { MessageCreateParamsStreaming } from '@anthropic-ai/sdk/resources/messages'",
    '',
    `export const requests = ${JSON.stringify(bodies, null, 2)} satisfies MessageCreateParamsStreaming[]`,
    '',
  ].join('\n')
}

describe('recorded request bodies', () => {
  it('equal the fixtures, which equal the typed module tsc checks against the SDK request type', async () => {
    server = await startModelServer([
      {
        kind: 'stream',
        reasoning: ['Add first, ', 'then multiply.'],
        toolCalls: [
          { id: 'toolu_fx_add', name: 'add', arguments: '{"a":2,"b":3}' },
          { id: 'toolu_fx_mul', name: 'multiply', arguments: '{"a":5,"b":4}' },
        ],
      },
      answer(['2 + 3 = 5; I cannot multiply.'], undefined, ['No multiply tool.']),
      answer(['You are welcome.']),
    ])
    const { client } = testClient(server, { thinkingBudget: 2048, maxTokens: 4096 })
    const session = newStore().create()
    const signal = new AbortController().signal
    const system = 'You are a careful calculator.'
    await runAgent({ client, session, system, prompt: 'Add 2 and 3, then multiply by 4.', tools: [addTool], signal })
    await runAgent({ client, session, system, prompt: 'Thanks.', tools: [addTool], signal })
    const bodies = server.requests.map((request) => request.body)
    expect(bodies).toHaveLength(3)

    if (UPDATE) {
      writeFileSync(JSON_FILE, `${JSON.stringify(bodies, null, 2)}\n`)
      writeFileSync(TS_FILE, typedModule(bodies))
    }
    if (!existsSync(JSON_FILE)) throw new Error(`${JSON_FILE.pathname} is missing: run with DSH_UPDATE_FIXTURES=1 to write it`)
    const stored: unknown = JSON.parse(readFileSync(JSON_FILE, 'utf8'))
    expect(bodies).toEqual(stored)
    expect(typedRequests).toEqual(stored)
  })
})
