import { describe, expect, it } from 'vitest'
import {
  type ContextMessage,
  chatRenderer,
  firstUnsent,
  renderChat,
  renderResponses,
  responsesRenderer,
  type SessionContext,
} from '../../src/index.js'
import { viewLayout } from '../../src/view.js'
import { liveHost, play } from '../helpers.js'

// `rewrite` maps each message before it renders: the incremental renderers
// call it for the messages they render only, and a full render gives the
// same body. `firstUnsent` reads a view's layout and agrees with a walk of
// the same messages without one.

function grow(steps: number) {
  const { sessions, contextOf } = liveHost()
  const session = sessions.create()
  session.append('user/message', { text: 'go' })
  session.append('turn/start', { turn: 1 })
  const step = (i: number): void =>
    play(session, [
      { type: 'step/start', data: { model: 'm', provider: 'p' } },
      { type: 'tool/call', data: { turn: 1, callId: `c${i}`, name: 'read_file', arguments: { path: `${i}` } } },
      { type: 'step/end', data: { usage: { input: 1, output: 1 }, finish: 'tool-calls' } },
      { type: 'tool/result', data: { turn: 1, callId: `c${i}`, content: { text: `r${i}` } } },
      ...(i % 4 === 0 ? [{ type: 'user/message', data: { text: `drop ${i}` } }] : []),
    ])
  for (let i = 0; i < steps; i++) step(i)
  return { session, contextOf, step }
}

/** Upper-cases user text and leaves out a user message starting `drop`; counts its calls. */
function rewriter() {
  const seen = { calls: 0 }
  const cache = new WeakMap<ContextMessage, ContextMessage | null>()
  const rewrite = (message: ContextMessage): ContextMessage | null => {
    seen.calls++
    if (message.role !== 'user') return message
    let out = cache.get(message)
    if (out === undefined) {
      const block = message.blocks[0] as { type: string; text?: string }
      out =
        block.text?.startsWith('drop') === true ? null : { ...message, blocks: [{ type: 'text', text: String(block.text).toUpperCase() }] }
      cache.set(message, out)
    }
    return out
  }
  return { seen, rewrite }
}

describe('rewrite', () => {
  it('is called once per message an incremental renderer renders, and the body equals a full render with the same rewrite', () => {
    const { session, contextOf, step } = grow(300)
    const chat = rewriter()
    const responses = rewriter()
    const c = chatRenderer({ model: 'm', system: 'S', rewrite: chat.rewrite })
    const r = responsesRenderer({ model: 'm', rewrite: responses.rewrite })
    let context = contextOf(session)
    c.render(context)
    r.render(context)
    for (let i = 300; i < 310; i++) {
      const before = { chat: chat.seen.calls, responses: responses.seen.calls, rendered: c.stats.rendered }
      step(i)
      context = contextOf(session)
      const body = c.render(context)
      expect(chat.seen.calls - before.chat).toBe(c.stats.rendered - before.rendered)
      expect(chat.seen.calls - before.chat).toBeLessThanOrEqual(3)
      expect(body).toEqual(renderChat(context, { model: 'm', system: 'S', rewrite: chat.rewrite }))
      const rendered = r.render(context)
      expect(responses.seen.calls - before.responses).toBeLessThanOrEqual(3)
      expect(rendered).toEqual(renderResponses(context, { model: 'm', rewrite: responses.rewrite }))
    }
    const messages = c.render(context).body.messages
    expect(messages.some((m) => m.role === 'user' && m.content === 'GO')).toBe(true)
    expect(messages.some((m) => m.role === 'user' && String(m.content).startsWith('drop'))).toBe(false)
  })

  it('firstUnsent reads a view layout and agrees with the same messages without one', () => {
    const { session, contextOf } = grow(200)
    const context = contextOf(session)
    expect(viewLayout(context)).toBeDefined()
    const flat: SessionContext = { ...context, messages: [...context.messages] }
    expect(viewLayout(flat)).toBeUndefined()
    for (const throughSeq of [0, 3, 100, 555, session.seq - 2, session.seq]) {
      const previous = { id: 'r', throughSeq }
      expect(firstUnsent(context, previous)).toBe(firstUnsent(flat, previous))
    }
  })
})
