import { describe, expect, it } from 'vitest'
import { renderChat } from '../src/index.js'
import { liveHost, play } from './helpers.js'

const settled = (child: string) => ({ kind: 'settled', child, mode: 'one-shot', reason: 'completed', text: 'done' })

describe('sessionContext: subagent notices', () => {
  it('reads a notice as a user message of one notice block, after the step it landed in and after the result of the call it landed beside', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [
      { type: 'user/message', data: { text: 'delegate' } },
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'on it' } },
      { type: 'subagent/notice', data: settled('c9') },
      { type: 'tool/call', data: { turn: 1, callId: 'k', name: 'subagent', arguments: { prompt: 'p' } } },
      { type: 'subagent/notice', data: settled('c10') },
      { type: 'tool/result', data: { turn: 1, callId: 'k', content: { text: 'c10 completed' } } },
      { type: 'assistant/chunk', data: { turn: 1, index: 1, delta: 'fin' } },
      { type: 'subagent/notice', data: { kind: 'report', child: 'c11', text: 'half way' } },
      { type: 'assistant/message', data: { turn: 1, text: 'fin' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ])
    const context = contextOf(session)
    const shape = context.messages.map((message) => {
      const block = message.blocks[0] as { type: string; data?: { child?: string }; callId?: string }
      return `${message.role}:${block.type}${block.data?.child === undefined ? '' : ` ${block.data.child}`}${block.callId === undefined ? '' : ` ${block.callId}`}`
    })
    expect(shape).toEqual([
      'user:text',
      'assistant:text',
      'tool:tool-result k',
      'user:notice c9',
      'user:notice c10',
      'assistant:text',
      'user:notice c11',
    ])
    expect(context.messages[3]?.blocks[0]).toEqual({ type: 'notice', event: 'subagent/notice', data: settled('c9') })
    // A renderer does not phrase notices: it leaves them out and counts them.
    const chat = renderChat(context)
    expect(chat.body.messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(chat.warnings['unknown-block']).toBe(3)
  })

  it('Chat sends reasoning back as reasoning_content on a message that calls tools when asked, and nowhere else', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [
      { type: 'user/message', data: { text: 'add' } },
      { type: 'assistant/reasoning', data: { turn: 1, index: 0, delta: 'I should add.' } },
      { type: 'tool/call', data: { turn: 1, callId: 'r1', name: 'add', arguments: '{"a":1}' } },
      { type: 'tool/result', data: { turn: 1, callId: 'r1', content: '3' } },
      { type: 'assistant/reasoning', data: { turn: 1, index: 1, delta: 'Done.' } },
      { type: 'assistant/message', data: { turn: 1, text: '3' } },
    ])
    const context = contextOf(session)
    const plain = renderChat(context, { model: 'm' })
    expect(plain.body.messages[1]).not.toHaveProperty('reasoning_content')
    expect(plain.warnings['reasoning-dropped']).toBe(2)
    const deepseek = renderChat(context, { model: 'm', reasoningContent: true })
    expect(deepseek.body.messages).toEqual([
      { role: 'user', content: 'add' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'I should add.',
        tool_calls: [{ id: 'r1', type: 'function', function: { name: 'add', arguments: '{"a":1}' } }],
      },
      { role: 'tool', tool_call_id: 'r1', content: '3' },
      { role: 'assistant', content: '3' },
    ])
    expect(deepseek.warnings['reasoning-dropped']).toBe(1)
  })
})
