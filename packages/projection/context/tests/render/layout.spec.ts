import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import {
  anthropicRenderer,
  chatRenderer,
  renderAnthropic,
  renderChat,
  renderResponses,
  responsesRenderer,
  type SessionContext,
} from '../../src/index.js'
import { viewLayout } from '../../src/view.js'
import { liveHost, play } from '../helpers.js'
import { compaction } from '../scripts.js'

// Renderers over views the fold and `contextView` build (not hand-made
// contexts): a view in view order carries its layout (the state's chunks and
// a short tail), and the incremental renderers find what changed from it by
// chunk reference. Every render must equal a fresh full render of the same
// view, and an append must cost its new messages: the kept messages compared
// are bounded by one chunk plus the tail, never the conversation.

const CHUNK = 64
const SYSTEM = 'You are a careful agent.'

describe('incremental renderers over folded views', () => {
  for (const seed of [11, 12]) {
    it(`equal a fresh full render after every step, prune, compaction and open step, and compare at most one chunk per append between views in view order (seed ${seed})`, () => {
      const random = prng(seed)
      const { sessions, contextOf } = liveHost()
      const session = sessions.create()
      session.append('user/message', { text: 'Survey the repository.' })
      session.append('turn/start', { turn: 1 })
      const chat = chatRenderer({ model: 'm', system: SYSTEM, reasoningContent: true })
      const anthropic = anthropicRenderer({ model: 'm' })
      const responses = responsesRenderer({ model: 'm' })
      const check = (context: SessionContext): void => {
        expect(chat.render(context)).toEqual(renderChat(context, { model: 'm', system: SYSTEM, reasoningContent: true }))
        expect(anthropic.render(context)).toEqual(renderAnthropic(context, { model: 'm' }))
        expect(responses.render(context)).toEqual(renderResponses(context, { model: 'm' }))
      }
      let previous = contextOf(session)
      check(previous)
      let calls = 0
      const seen = { appends: 0, prunes: 0, compactions: 0, open: 0, layoutAppends: 0 }
      for (let op = 0; op < 300; op++) {
        const r = random()
        const before = { compared: chat.stats.compared, rebuilds: chat.stats.rebuilds }
        let kind: 'append' | 'other' = 'append'
        if (r < 0.7) {
          const id = `c${++calls}`
          play(session, [
            { type: 'step/start', data: { model: 'm', provider: 'p' } },
            { type: 'assistant/chunk', data: { turn: 1, index: op, delta: `reading ${id}` } },
            { type: 'tool/call', data: { turn: 1, callId: id, name: 'read_file', arguments: { path: `${id}.md` } } },
            { type: 'step/end', data: { usage: { input: 10, output: 2 }, finish: 'tool-calls' } },
            { type: 'tool/result', data: { turn: 1, callId: id, content: { text: `contents of ${id}` } } },
          ])
          seen.appends++
        } else if (r < 0.8) {
          session.append('user/message', { text: `More, please (${op}).` })
          seen.appends++
        } else if (r < 0.88) {
          // An open step: streamed text and a call whose result has not come (a synthetic result in the tail).
          const id = `c${++calls}`
          play(session, [
            { type: 'step/start', data: { model: 'm', provider: 'p' } },
            { type: 'assistant/chunk', data: { turn: 1, index: op, delta: 'thinking' } },
            { type: 'tool/call', data: { turn: 1, callId: id, name: 'read_file', arguments: { path: `${id}.md` } } },
          ])
          check(contextOf(session))
          play(session, [
            { type: 'step/end', data: { usage: { input: 10, output: 2 }, finish: 'tool-calls' } },
            { type: 'tool/result', data: { turn: 1, callId: id, content: { text: `contents of ${id}` } } },
          ])
          seen.open++
          kind = 'other'
        } else if (r < 0.94 && calls > 4) {
          session.append('compaction/prune', { callIds: [`c${1 + Math.floor(random() * (calls - 1))}`] })
          seen.prunes++
          kind = 'other'
        } else if (session.seq > 20) {
          const to = Math.floor(session.seq / 2)
          play(session, compaction(`k${op}`, 0, to, `Summary up to ${to}.`))
          seen.compactions++
          kind = 'other'
        }
        const context = contextOf(session)
        check(context)
        const layouts = viewLayout(previous) !== undefined && viewLayout(context) !== undefined
        if (layouts) seen.layoutAppends += kind === 'append' ? 1 : 0
        previous = context
        if (kind === 'append' && layouts && chat.stats.rebuilds === before.rebuilds) {
          // An append between two views in view order: the kept messages compared are at most the chunk it changed and the first difference.
          expect(chat.stats.compared - before.compared).toBeLessThanOrEqual(CHUNK + 1)
        }
      }
      expect(seen.appends).toBeGreaterThan(200)
      expect(seen.layoutAppends).toBeGreaterThan(100)
      expect(seen.open).toBeGreaterThan(10)
      expect(seen.prunes).toBeGreaterThan(5)
      expect(seen.compactions).toBeGreaterThan(5)
      expect(chat.stats.rebuilds).toBeGreaterThan(10)
    })
  }

  it("an append at 5,000 steps compares a chunk's worth of kept messages, and the Chat body is the renderer's own list, extended in place", () => {
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
      ])
    for (let i = 0; i < 5_000; i++) step(i)
    const chat = chatRenderer({ model: 'm', system: SYSTEM })
    const first = chat.render(contextOf(session)).body.messages
    expect(first).toHaveLength(1 + 1 + 2 * 5_000)
    const before = chat.stats
    step(5_000)
    const view = contextOf(session)
    const next = chat.render(view).body.messages
    expect(next).toBe(first)
    expect(next).toHaveLength(1 + 1 + 2 * 5_001)
    expect(chat.stats.rendered - before.rendered).toBe(2)
    expect(chat.stats.compared - before.compared).toBeLessThanOrEqual(CHUNK)
    expect(next).toEqual(renderChat(view, { model: 'm', system: SYSTEM }).body.messages)
    // The view's list, read, is the same messages in the same order.
    expect(view.messages).toHaveLength(1 + 2 * 5_001)
  })
})
