import { describe, expect, it } from 'vitest'
import { finishOf, mergeRawUsage, tokenUsage, usageFromMessages } from '../src/usage.js'

describe('Messages usage in dsh kinds', () => {
  it('maps the disjoint input counts one to one and takes the thinking tokens out of the output', () => {
    const raw = {
      input_tokens: 12,
      cache_read_input_tokens: 300,
      cache_creation_input_tokens: 40,
      output_tokens: 90,
      output_tokens_details: { thinking_tokens: 70 },
    }
    expect(usageFromMessages(raw)).toEqual({ input: 12, output: 20, cacheRead: 300, cacheWrite: 40, reasoning: 70 })
    expect(tokenUsage(usageFromMessages(raw))).toEqual({ input: 12, output: 20, cacheRead: 300, cacheWrite: 40, reasoning: 70 })
  })

  it('counts what is missing or malformed as 0, and ignores a thinking count above the output', () => {
    expect(usageFromMessages({ input_tokens: 5, output_tokens: 3, cache_read_input_tokens: null })).toEqual({
      input: 5,
      output: 3,
      cacheRead: 0,
      cacheWrite: 0,
      reasoning: 0,
    })
    expect(usageFromMessages({ input_tokens: -1, output_tokens: 2, output_tokens_details: { thinking_tokens: 9 } })).toMatchObject({
      input: 0,
      output: 2,
      reasoning: 0,
    })
    expect(tokenUsage(usageFromMessages(undefined))).toEqual({ input: 0, output: 0 })
  })

  it('the final usage is message_start overridden by the non-null counts of message_delta', () => {
    const start = mergeRawUsage(undefined, { input_tokens: 10, cache_read_input_tokens: 4, output_tokens: 1 })
    expect(mergeRawUsage(start, { output_tokens: 25, input_tokens: null, cache_read_input_tokens: null })).toEqual({
      input_tokens: 10,
      cache_read_input_tokens: 4,
      output_tokens: 25,
    })
  })

  it('finish: max_tokens → max-tokens, tool_use or a step with calls → tool-calls, else stop', () => {
    expect(finishOf('max_tokens', false)).toBe('max-tokens')
    expect(finishOf('model_context_window_exceeded', false)).toBe('max-tokens')
    expect(finishOf('tool_use', true)).toBe('tool-calls')
    expect(finishOf('end_turn', true)).toBe('tool-calls')
    expect(finishOf('end_turn', false)).toBe('stop')
    expect(finishOf(undefined, false)).toBe('stop')
  })
})
