import { describe, expect, it } from 'vitest'
import { type ContextMessage, renderAnthropic, renderChat, renderResponses } from '../src/index.js'
import { liveHost, play, transcript } from './helpers.js'
import { contextOf } from './render/fixture.js'

const CALLED = [
  { type: 'user/message', data: { text: 'read it' } },
  { type: 'assistant/message', data: { turn: 1, text: '', blocks: [{ type: 'tool-call', id: 'c1', name: 'read', input: {} }] } },
] as const

function resultOf(data: Record<string, unknown>) {
  const { sessions, contextOf: viewOf } = liveHost()
  const session = sessions.create()
  play(session, [...CALLED, { type: 'tool/result', data: { turn: 1, callId: 'c1', ...data } }])
  return viewOf(session)
}

describe('tool/result blocks the model cannot read', () => {
  it('a tool-result nested in the blocks is dropped and counted, and the model reads the result text the event carries', () => {
    const context = resultOf({
      content: 'hello',
      blocks: [{ type: 'tool-result', callId: 'c1', content: [{ type: 'text', text: 'hello' }] }],
    })
    expect(context.messages.at(-1)?.blocks).toEqual([{ type: 'tool-result', callId: 'c1', content: [{ type: 'text', text: 'hello' }] }])
    expect(context.warnings['invalid-block']).toBe(1)
    expect(renderChat(context, { model: 'm' }).body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'hello' })
    expect(renderResponses(context, { model: 'm' }).body.input.at(-1)).toEqual({
      type: 'function_call_output',
      call_id: 'c1',
      output: 'hello',
    })
    expect(renderAnthropic(context, { model: 'm', cache: false }).body.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'c1', content: [{ type: 'text', text: 'hello' }] }],
    })
  })

  it('beside blocks it can read, a nested tool-result is dropped and counted and the readable blocks stay the content', () => {
    const context = resultOf({
      content: 'ignored: the blocks are the content',
      isError: true,
      blocks: [
        { type: 'text', text: 'partial' },
        { type: 'tool-result', callId: 'c1', content: 'nested' },
      ],
    })
    expect(transcript(context).at(-1)).toBe('tool: result c1 error: partial')
    expect(context.warnings['invalid-block']).toBe(1)
  })

  it('blocks none of which can be read leave the tool outcome; an empty blocks list stays an empty result', () => {
    const unreadable = resultOf({ content: { code: 'E', message: 'bad' }, isError: true, blocks: [{ type: 'text' }] })
    expect(transcript(unreadable).at(-1)).toBe('tool: result c1 error: Error E: bad')
    expect(unreadable.warnings['invalid-block']).toBe(1)
    const empty = resultOf({ content: 'hello', blocks: [] })
    expect(transcript(empty).at(-1)).toBe('tool: result c1: ')
    expect(empty.warnings['invalid-block']).toBe(0)
  })

  it('a tool-result nested in a result is counted by every renderer, not left out unseen', () => {
    const messages: ContextMessage[] = [
      { role: 'user', seq: 0, blocks: [{ type: 'text', text: 'read it' }] },
      { role: 'assistant', seq: 1, blocks: [{ type: 'tool-call', id: 'c1', name: 'read', input: {} }] },
      {
        role: 'tool',
        seq: 2,
        blocks: [
          {
            type: 'tool-result',
            callId: 'c1',
            content: [
              { type: 'text', text: 'outer' },
              { type: 'tool-result', callId: 'c1', content: [{ type: 'text', text: 'inner' }] },
            ],
          },
        ],
      },
    ]
    const context = contextOf(messages)
    const chat = renderChat(context)
    const responses = renderResponses(context)
    const anthropic = renderAnthropic(context, { cache: false })
    expect(chat.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'outer' })
    expect(responses.body.input.at(-1)).toEqual({ type: 'function_call_output', call_id: 'c1', output: 'outer' })
    expect(anthropic.body.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'c1', content: [{ type: 'text', text: 'outer' }] }],
    })
    expect([chat, responses, anthropic].map((rendered) => rendered.warnings['unsupported-block'])).toEqual([1, 1, 1])
  })
})
