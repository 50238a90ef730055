import type { MessageCreateParamsStreaming, MessageParam } from '@anthropic-ai/sdk/resources/messages'
import { thinkingSignature } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { requests } from './fixtures/requests.js'

/**
 * The recorded request bodies (`fixtures/requests.json`, kept equal to the
 * typed module by fixtures.spec.ts) checked against the SDK's request types:
 * the module's `satisfies MessageCreateParamsStreaming[]` and the
 * assignments below are compiled by `tsc --noEmit` over the tests. Each
 * `@ts-expect-error` is a control showing the check is not vacuous.
 */
describe('recorded request bodies and the SDK request types', () => {
  it('every body is a streaming Messages request; its messages are MessageParams', () => {
    const bodies: MessageCreateParamsStreaming[] = requests
    const messages: MessageParam[] = bodies.flatMap((body) => body.messages)
    expect(bodies).toHaveLength(3)
    expect(messages.length).toBeGreaterThan(0)

    const first = requests[0]!
    // @ts-expect-error control: a request needs max_tokens
    ;({ model: first.model, messages: first.messages, stream: true }) satisfies MessageCreateParamsStreaming
    // @ts-expect-error control: a thinking block needs its signature
    ;({ role: 'assistant', content: [{ type: 'thinking', thinking: 'x' }] }) satisfies MessageParam
  })

  it('the tool step goes back as signed thinking, tool_use and tool_result (the failed one is_error), with breakpoints', () => {
    const second = requests[1]!
    const third = requests[2]!
    const thought = 'Add first, then multiply.'
    expect(second.messages[1]?.content[0]).toEqual({ type: 'thinking', thinking: thought, signature: thinkingSignature(thought) })
    expect(second.messages[2]?.content).toMatchObject([
      { type: 'tool_result', tool_use_id: 'toolu_fx_add' },
      { type: 'tool_result', tool_use_id: 'toolu_fx_mul', is_error: true, cache_control: { type: 'ephemeral' } },
    ])
    // The second turn: the system, the last message before the newest turn and the last message carry breakpoints.
    expect(third.system.at(-1)).toMatchObject({ cache_control: { type: 'ephemeral' } })
    const marked = third.messages.flatMap((message, m) =>
      message.content.flatMap((block, b) => ('cache_control' in block ? [`${m}.${b}`] : [])),
    )
    expect(marked).toEqual([`${third.messages.length - 2}.1`, `${third.messages.length - 1}.0`])
  })
})
