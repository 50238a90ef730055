import { SessionSeq } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { applyContextEvent, contextView, renderResponses, sessionContextUnit } from '../src/index.js'

/** More calls than a call's arguments may hold (spreading them into `push` overflows the stack). */
const CALLS = 150_000

describe('a step of very many tool calls', () => {
  it(`a message of ${CALLS} calls (an event under EVENT_MAX_BYTES): the view answers each, the Responses renderer renders each`, () => {
    const blocks = Array.from({ length: CALLS }, (_, i) => ({ type: 'tool-call', id: `c${i}`, name: 'read', input: {} }))
    let state = sessionContextUnit.init()
    state = applyContextEvent(state, { type: 'user/message', seq: SessionSeq(0), time: 0, data: { text: 'Read them all.' } })
    state = applyContextEvent(state, { type: 'assistant/message', seq: SessionSeq(1), time: 0, data: { turn: 1, text: '', blocks } })
    const context = contextView(state)
    expect(context.messages).toHaveLength(CALLS + 2)
    expect(context.warnings['missing-result']).toBe(CALLS)
    const { body } = renderResponses(context, { model: 'm' })
    expect(body.input.filter((item) => item.type === 'function_call')).toHaveLength(CALLS)
    expect(body.input.filter((item) => item.type === 'function_call_output')).toHaveLength(CALLS)
  })
})
