import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  answer,
  callTools,
  type ModelServer,
  type RecordedRequest,
  type ResponsesRequestBody,
  startModelServer,
} from '@dsh/driver-openai/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun } from './support/dsh-process.js'

// `dsh run --api responses` as a user runs it: the built CLI in its own
// process, the local model server (the only fake) counting the input items
// each request sends.
const KEY = 'sk-e2e-responses-7b2e'

let dir: string
let root: string
let server: ModelServer | undefined

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-run-responses-'))
  root = join(dir, 'root')
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(dir, { recursive: true, force: true })
})

const dsh = (args: string[]) => dshRun(args, cleanEnv({ DSH_API_KEY: KEY }))

const bodyOf = (request: RecordedRequest): ResponsesRequestBody => request.body as unknown as ResponsesRequestBody
const itemTypes = (request: RecordedRequest): string[] => {
  const input = bodyOf(request).input
  return typeof input === 'string' ? ['message'] : input.map((item) => String(item.type))
}

describe('dsh run --api responses', () => {
  it('after the first request only new input items go out (counted at the server), across a --resume; another --model starts a new chain', async () => {
    server = await startModelServer((request) => {
      expect(request.protocol).toBe('responses')
      if (itemTypes(request).at(-1) === 'function_call_output') return answer(['Listed.'])
      return callTools([{ id: `call_${request.url.length}_${Date.now() % 1000}`, name: 'list_agents', arguments: '{}' }])
    })
    const first = await dsh([
      'run',
      '--api',
      'responses',
      'List your agents.',
      '--root',
      root,
      '--base-url',
      server.baseURL,
      '--model',
      'm1',
    ])
    expect(first.code, first.stdout + first.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(first.stdout)![1]!
    const resumed = await dsh([
      'run',
      '--api',
      'responses',
      '--resume',
      id,
      'Again.',
      '--root',
      root,
      '--base-url',
      server.baseURL,
      '--model',
      'm1',
    ])
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    const other = await dsh([
      'run',
      '--api',
      'responses',
      '--resume',
      id,
      'Once more.',
      '--root',
      root,
      '--base-url',
      server.baseURL,
      '--model',
      'm2',
    ])
    expect(other.code, other.stdout + other.stderr).toBe(0)

    expect(server.requests.map(itemTypes)).toEqual([
      ['message'],
      ['function_call_output'],
      // The resumed process continues the chain from the log: only the new prompt.
      ['message'],
      ['function_call_output'],
      // Another model: a new chain with the whole context (3 prompts, 2 calls, 2 results, 2 answers so far).
      [
        'message',
        'function_call',
        'function_call_output',
        'message',
        'message',
        'function_call',
        'function_call_output',
        'message',
        'message',
      ],
      ['function_call_output'],
    ])
    const previous = server.requests.map((request) => bodyOf(request).previous_response_id ?? null)
    expect(previous[0]).toBeNull()
    expect(previous[4]).toBeNull()
    expect(previous.filter((each) => each !== null)).toHaveLength(4)

    const shown = await dsh(['show', id, '--json', '--limit', '1000', '--root', root])
    const events = (JSON.parse(shown.stdout) as { events: { type: string; data: Record<string, unknown> }[] }).events
    const ends = events.filter((event) => event.type === 'step/end').map((event) => event.data.responseId)
    expect(ends).toHaveLength(6)
    // Each continued request names the response recorded in the step/end before it.
    expect([previous[1], previous[2], previous[3], previous[5]]).toEqual([ends[0], ends[1], ends[2], ends[4]])
    expect(events.filter((event) => event.type === 'step/start').map((event) => event.data)).toEqual([
      ...Array.from({ length: 4 }, () => ({ model: 'm1', provider: '127.0.0.1', api: 'responses' })),
      ...Array.from({ length: 2 }, () => ({ model: 'm2', provider: '127.0.0.1', api: 'responses' })),
    ])
  })
})
