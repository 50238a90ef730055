import { describe, expect, it } from 'vitest'
import {
  type ContextMessage,
  renderAnthropic,
  renderChat,
  renderResponses,
  responsesRenderer,
  type SessionContext,
} from '../../src/index.js'
import { attachments, contextOf, fixtureContext, fixtureMessages, SUMMARY } from './fixture.js'

/** A session of `steps` tool-calling steps: user, assistant with a call, its result; seqs leave room for step/end. */
function longSession(steps: number): { messages: ContextMessage[]; lastEnd: number } {
  const messages: ContextMessage[] = [{ role: 'system', seq: 0, blocks: [{ type: 'text', text: 'system prompt' }] }]
  let seq = 0
  let lastEnd = 0
  for (let i = 0; i < steps; i++) {
    const id = `call_${String(i).padStart(6, '0')}`
    messages.push({ role: 'user', seq: ++seq, blocks: [{ type: 'text', text: `please read file ${i % 10}` }] })
    messages.push({
      role: 'assistant',
      seq: ++seq,
      blocks: [{ type: 'tool-call', id, name: 'read', input: { path: `file ${i % 10}` } }],
    })
    lastEnd = ++seq
    messages.push({
      role: 'tool',
      seq: ++seq,
      blocks: [{ type: 'tool-result', callId: id, content: [{ type: 'text', text: `contents of file ${i % 10}` }] }],
    })
  }
  return { messages, lastEnd }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v)
    Object.freeze(value)
  }
  return value
}

describe('Responses with a previous response', () => {
  it('sends the same bytes at step 5,000 as at step 50: only the messages after the seq the response covered', () => {
    const bytes = (steps: number): { chained: number; full: number } => {
      const { messages, lastEnd } = longSession(steps)
      const context = contextOf(messages)
      const previous = { id: 'resp_last', throughSeq: lastEnd }
      const chained = renderResponses(context, { previousResponse: previous })
      expect(chained.body.previous_response_id).toBe('resp_last')
      expect(chained.body.input).toEqual([expect.objectContaining({ type: 'function_call_output' })])
      return { chained: JSON.stringify(chained.body).length, full: JSON.stringify(renderResponses(context).body).length }
    }
    const at50 = bytes(50)
    const at5000 = bytes(5000)
    expect(at5000.chained).toBe(at50.chained)
    expect(at5000.full).toBeGreaterThan(90 * at50.full)
  })

  it('an incremental renderer over 5,000 steps renders only the new step when one is appended', () => {
    const { messages } = longSession(5000)
    const renderer = responsesRenderer()
    renderer.render(contextOf(messages.slice(0, -3)))
    const before = renderer.stats
    const { lastEnd } = longSession(5000)
    const body = renderer.render(contextOf(messages), { id: 'resp_last', throughSeq: lastEnd }).body
    expect(renderer.stats.rendered - before.rendered).toBe(3)
    expect(body.input).toHaveLength(1)
  })

  it('a compaction after the response, or a response that covers no message, sends the whole input without it and counts why', () => {
    const compacted = renderResponses(fixtureContext, { previousResponse: { id: 'resp_old', throughSeq: SUMMARY.seq - 1 } })
    expect(compacted.body.previous_response_id).toBeUndefined()
    expect(compacted.warnings['previous-response-unusable']).toBe(1)
    expect(compacted.body.input).toEqual(renderResponses(fixtureContext).body.input)

    const context = contextOf(fixtureMessages.slice(2))
    const none = renderResponses(context, { previousResponse: { id: 'resp_x', throughSeq: 3 } })
    expect(none.body.previous_response_id).toBeUndefined()
    expect(none.warnings['previous-response-unusable']).toBe(1)
  })
})

describe('Anthropic specifics', () => {
  it('puts at most four breakpoints: the system, the message before the newest turn, the last message; none with cache: false', () => {
    const { messages } = longSession(3)
    const context = contextOf([...messages, { role: 'user', seq: 100, blocks: [{ type: 'text', text: 'next question' }] }])
    const body = renderAnthropic(context).body
    const marked = body.messages.flatMap((m, i) => (m.content.some((b) => 'cache_control' in b) ? [i] : []))
    expect(body.system?.at(-1)?.cache_control).toEqual({ type: 'ephemeral' })
    // the newest turn is the last user message: the message before it, and that last message
    expect(marked).toEqual([body.messages.length - 2, body.messages.length - 1])
    const plain = renderAnthropic(context, { cache: false }).body
    expect(JSON.stringify(plain)).not.toContain('cache_control')
  })

  it('sends a system message after the conversation began as user text, counted; merges consecutive user messages', () => {
    const context = contextOf([
      { role: 'system', seq: 0, blocks: [{ type: 'text', text: 'first' }] },
      { role: 'user', seq: 1, blocks: [{ type: 'text', text: 'hello' }] },
      { role: 'system', seq: 2, blocks: [{ type: 'text', text: 'a reminder' }] },
      { role: 'user', seq: 3, blocks: [{ type: 'text', text: 'again' }] },
    ])
    const rendered = renderAnthropic(context, { cache: false })
    expect(rendered.body.system).toEqual([{ type: 'text', text: 'first' }])
    expect(rendered.body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'text', text: 'a reminder' },
          { type: 'text', text: 'again' },
        ],
      },
    ])
    expect(rendered.warnings['system-as-user']).toBe(1)
  })
})

describe('what every renderer shares', () => {
  it('renders without changing its input (a frozen context renders the same bodies)', () => {
    const frozen: SessionContext = deepFreeze(structuredClone(fixtureContext))
    expect(renderChat(frozen, { attachments })).toEqual(renderChat(fixtureContext, { attachments }))
    expect(renderResponses(frozen, { attachments })).toEqual(renderResponses(fixtureContext, { attachments }))
    expect(renderAnthropic(frozen, { attachments })).toEqual(renderAnthropic(fixtureContext, { attachments }))
  })

  it('a missing model is counted and left empty; the option overrides the context', () => {
    const context: SessionContext = { ...fixtureContext, model: null }
    const rendered = renderChat(context)
    expect(rendered.body.model).toBe('')
    expect(rendered.warnings['missing-model']).toBe(1)
    expect(renderAnthropic(context, { model: 'claude-x' }).body.model).toBe('claude-x')
    expect(renderAnthropic(context, { model: 'claude-x' }).warnings['missing-model']).toBe(0)
  })

  it('a file type the protocol does not take becomes a counted note; without the resolver a stored attachment is a counted placeholder', () => {
    const text = { digest: 'd'.repeat(64), mediaType: 'text/csv', size: 3, data: 'YSxi' }
    const context = contextOf([{ role: 'user', seq: 1, blocks: [{ type: 'file', attachment: text }] }])
    for (const render of [renderChat, renderResponses, renderAnthropic]) {
      const rendered = render(context)
      expect(rendered.warnings['unsupported-block']).toBe(1)
      expect(JSON.stringify(rendered.body)).toContain('text/csv) omitted')
    }
    for (const render of [renderChat, renderResponses, renderAnthropic]) {
      const rendered = render(fixtureContext)
      // the stored PDF is missing too without the resolver
      expect(rendered.warnings['missing-attachment']).toBe(2)
      expect(JSON.stringify(rendered.body)).toContain('report.pdf (application/pdf, 52 bytes) is not available')
    }
  })
})
