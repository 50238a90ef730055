import { describe, expect, it } from 'vitest'
import { runAgent } from '../src/index.js'
import { answer, callTools, derivedUsage, type ModelServer, startModelServer } from '../src/testing/model-server.js'
import { usageFromChat } from '../src/usage.js'
import { newStore, ofType, testClient } from './helpers.js'

describe('usageFromChat: the provider’s overlapping counts to dsh’s disjoint ones', () => {
  it('takes cached prompt tokens out of input and reasoning tokens out of output', () => {
    expect(
      usageFromChat({
        prompt_tokens: 1000,
        completion_tokens: 300,
        total_tokens: 1300,
        prompt_tokens_details: { cached_tokens: 600 },
        completion_tokens_details: { reasoning_tokens: 120 },
      }),
    ).toEqual({ input: 400, output: 180, cacheRead: 600, reasoning: 120 })
  })

  it('reads DeepSeek’s prompt_cache_hit_tokens when there are no prompt details', () => {
    expect(usageFromChat({ prompt_tokens: 50, completion_tokens: 7, prompt_cache_hit_tokens: 32, prompt_cache_miss_tokens: 18 })).toEqual({
      input: 18,
      output: 7,
      cacheRead: 32,
      reasoning: 0,
    })
  })

  it('ignores details that do not fit their totals, and counts missing or malformed totals as 0', () => {
    expect(
      usageFromChat({
        prompt_tokens: 10,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 11 },
        completion_tokens_details: { reasoning_tokens: -1 },
      }),
    ).toEqual({ input: 10, output: 5, cacheRead: 0, reasoning: 0 })
    expect(usageFromChat({ prompt_tokens: 2.5, completion_tokens: '3' })).toEqual({ input: 0, output: 0, cacheRead: 0, reasoning: 0 })
    expect(usageFromChat(null)).toEqual({ input: 0, output: 0, cacheRead: 0, reasoning: 0 })
  })
})

describe('the fake server reports usage on every response and keeps its own record', () => {
  let server: ModelServer | undefined
  it('a turn of several steps stores exactly the server’s reports, mapped and summed', async () => {
    server = await startModelServer([
      callTools([{ id: 'c1', name: 'nope', arguments: '{}' }]),
      answer(['a', 'b'], undefined, ['r1', 'r2', 'r3']),
    ])
    try {
      const { client } = testClient(server.baseURL)
      const session = newStore().create()
      await runAgent({ client, session, prompt: 'go', tools: [], signal: new AbortController().signal })
      expect(server.reported.map((report) => report.request)).toEqual([0, 1])
      const expected = server.reported.map((report) => usageFromChat(report.usage))
      const [message] = ofType(session.events, 'assistant/message') as { usage: Record<string, number> }[]
      expect(message!.usage).toEqual({
        input: expected[0]!.input + expected[1]!.input,
        output: expected[0]!.output + expected[1]!.output,
        cacheRead: expected[0]!.cacheRead + expected[1]!.cacheRead,
        reasoning: expected[0]!.reasoning + expected[1]!.reasoning,
      })
      // Unscripted usage is derived from the request: the second request repeats a prefix, so part of it is cached.
      expect(server.reported[1]!.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0)
      expect(server.reported[1]!.usage.completion_tokens_details.reasoning_tokens).toBe(6)
      expect(derivedUsage(server.requests[1]!.body, { kind: 'stream', content: ['a', 'b'], reasoning: ['r1', 'r2', 'r3'] })).toEqual({
        prompt: server.reported[1]!.usage.prompt_tokens,
        completion: server.reported[1]!.usage.completion_tokens,
        cached: 40,
        reasoning: 6,
      })
    } finally {
      await server.close()
    }
  })
})
