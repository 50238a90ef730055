import type { StoredSessionEvent } from '@dsh/session'
import { projectionUnitSuite, type ScriptedEvent } from '@dsh/session-projection/testing'
import { describe, expect, it } from 'vitest'
import { contextView, renderChat, type SessionContextState, sessionContextStateSchema, sessionContextUnit } from '../src/index.js'
import { liveHost, play, transcript } from './helpers.js'

const NOTICE: ScriptedEvent = {
  type: 'subagent/notice',
  data: { kind: 'settled', child: 'bg', mode: 'one-shot', reason: 'completed', text: 'bg result 42' },
}

/** The first step: the model starts a background child, which answers at once. */
const STARTED: readonly ScriptedEvent[] = [
  { type: 'user/message', data: { text: 'order' } },
  { type: 'turn/start', data: { turn: 1 } },
  { type: 'step/start', data: { provider: 'p', model: 'm' } },
  {
    type: 'tool/call',
    data: { turn: 1, callId: 'c1', name: 'subagent', arguments: { description: 'bg', prompt: 'BG', run_in_background: true } },
  },
  { type: 'step/end', data: { usage: { input: 1, output: 1 }, finish: 'tool-calls' } },
  { type: 'tool/result', data: { turn: 1, callId: 'c1', content: 'started subagent bg' } },
]

/** The second step in each shape the fold assembles (from `step/start` to `step/end`), and what follows it. */
const SHAPES: readonly { name: string; step: readonly ScriptedEvent[]; after: readonly ScriptedEvent[] }[] = [
  {
    name: 'streamed text, then the message that assembles it (as the Chat driver writes)',
    step: [
      { type: 'step/start', data: { provider: 'p', model: 'm' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'I started it; ' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 1, delta: 'will wait.' } },
      { type: 'assistant/message', data: { turn: 1, text: 'I started it; will wait.', provider: 'p', model: 'm' } },
      { type: 'step/end', data: { usage: { input: 2, output: 2 }, finish: 'stop' } },
    ],
    after: [{ type: 'turn/end', data: { turn: 1, reason: 'completed' } }],
  },
  {
    name: 'streamed reasoning and text that turn/end commits',
    step: [
      { type: 'step/start', data: { provider: 'p', model: 'm' } },
      { type: 'assistant/reasoning', data: { turn: 1, index: 0, delta: 'wait' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'I started ' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 1, delta: 'it.' } },
      { type: 'step/end', data: { usage: { input: 2, output: 2 }, finish: 'stop' } },
    ],
    after: [{ type: 'turn/end', data: { turn: 1, reason: 'completed' } }],
  },
  {
    name: 'streamed text and calls, their results after step/end',
    step: [
      { type: 'step/start', data: { provider: 'p', model: 'm' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'reading' } },
      { type: 'tool/call', data: { turn: 1, callId: 'c2', name: 'read', arguments: { path: 'a' } } },
      { type: 'tool/call', data: { turn: 1, callId: 'c3', name: 'read', arguments: { path: 'b' } } },
      { type: 'step/end', data: { usage: { input: 2, output: 2 }, finish: 'tool-calls' } },
    ],
    after: [
      { type: 'tool/result', data: { turn: 1, callId: 'c2', content: 'A' } },
      { type: 'tool/result', data: { turn: 1, callId: 'c3', content: 'B' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ],
  },
  {
    name: 'a message of blocks whose call a tool/call event mirrors',
    step: [
      { type: 'step/start', data: { provider: 'p', model: 'm' } },
      {
        type: 'assistant/message',
        data: {
          turn: 1,
          text: 'reading',
          blocks: [
            { type: 'text', text: 'reading' },
            { type: 'tool-call', id: 'c2', name: 'read', input: { path: 'a' } },
          ],
        },
      },
      { type: 'tool/call', data: { turn: 1, callId: 'c2', name: 'read', arguments: { path: 'a' } } },
      { type: 'step/end', data: { usage: { input: 2, output: 2 }, finish: 'tool-calls' } },
    ],
    after: [
      { type: 'tool/result', data: { turn: 1, callId: 'c2', content: 'A' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ],
  },
  {
    name: 'a message with nothing streamed',
    step: [
      { type: 'step/start', data: { provider: 'p', model: 'm' } },
      { type: 'assistant/message', data: { turn: 1, text: 'I started it; will wait.' } },
      { type: 'step/end', data: { usage: { input: 2, output: 2 }, finish: 'stop' } },
    ],
    after: [{ type: 'turn/end', data: { turn: 1, reason: 'completed' } }],
  },
]

/** The script with the notice landing after the first `at` events of the step (1: right after its step/start). */
function scriptOf(shape: (typeof SHAPES)[number], at: number): ScriptedEvent[] {
  return [...STARTED, ...shape.step.slice(0, at), NOTICE, ...shape.step.slice(at), ...shape.after]
}

function folded(events: readonly StoredSessionEvent[], from?: SessionContextState): SessionContextState {
  let state = from ?? sessionContextUnit.init(Object.freeze({ inheritedEventCount: 0 as never }))
  for (const event of events) state = sessionContextUnit.apply(state, event)
  return state
}

/** A state as a checkpoint stores it: JSON, checked by the schema. */
function revived(state: SessionContextState): SessionContextState {
  const parsed = sessionContextStateSchema.safeParse(JSON.parse(JSON.stringify(state)))
  if (!parsed.success) throw new Error('the checkpoint does not pass the schema')
  return parsed.data
}

/** Whether an assistant message comes after a notice (the notice was read before an answer written while it landed). */
function answerAfterNotice(lines: readonly string[]): boolean {
  const notice = lines.indexOf('user: [notice]')
  return notice >= 0 && lines.slice(notice + 1).some((line) => line.startsWith('assistant:'))
}

describe('sessionContext: a notice that lands during a step is read after that step', () => {
  for (const shape of SHAPES) {
    it(`${shape.name}: at every position from step/start to step/end, live and resumed from a checkpoint at every cut`, () => {
      const { sessions, contextOf } = liveHost()
      // Where the notice lands right after step/end: read after the step, whatever the fold does inside it.
      const reference = sessions.create()
      play(reference, scriptOf(shape, shape.step.length))
      const expected = transcript(contextOf(reference))
      expect(expected).toContain('user: [notice]')
      expect(answerAfterNotice(expected)).toBe(false)

      for (let at = 1; at <= shape.step.length; at++) {
        const session = sessions.create()
        play(session, scriptOf(shape, at))
        const live = contextOf(session)
        expect({ at, transcript: transcript(live) }).toEqual({ at, transcript: expected })
        for (let cut = 0; cut <= session.events.length; cut++) {
          // A view read mid-step already reads the notice after the open step.
          const prefix = folded(session.events.slice(0, cut))
          expect({ at, cut, answerAfterNotice: answerAfterNotice(transcript(contextView(prefix))) }).toEqual({
            at,
            cut,
            answerAfterNotice: false,
          })
          const resumed = folded(session.events.slice(cut), revived(prefix))
          expect({ at, cut, messages: contextView(resumed).messages }).toEqual({ at, cut, messages: live.messages })
        }
      }
    })
  }

  it('the request after a step that answered while a child finished ends with the notice, not with the answer the model wrote before it', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, scriptOf(SHAPES[0] as (typeof SHAPES)[number], 1))
    const phrased = renderChat(contextOf(session), {
      model: 'm',
      rewrite: (message) =>
        message.blocks[0]?.type === 'notice'
          ? { ...message, blocks: [{ type: 'text', text: 'Background subagent bg has finished.' }] }
          : message,
    })
    expect(phrased.body.messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user'])
    expect(phrased.body.messages.at(-2)).toEqual({ role: 'assistant', content: 'I started it; will wait.' })
  })
})

// Forks cut at every position and revived checkpoints of a log whose notice lands before the step's first chunk.
projectionUnitSuite('sessionContext with a notice inside a step', {
  unit: sessionContextUnit,
  script: scriptOf(SHAPES[0] as (typeof SHAPES)[number], 1),
  neverThrows: true,
})
