import { SessionSeq, type ToolCallBlock } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  applyContextEvent,
  type ContextMessage,
  contextView,
  MISSING_RESULT_TEXT,
  PRUNED_RESULT_TEXT,
  renderResponses,
  type SessionContextState,
  sessionContextStateSchema,
  sessionContextUnit,
} from '../src/index.js'

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

/**
 * Steps whose calls stream one `tool/call` event at a time. Sized so that a
 * fold or view costing the step's calls per call (copying the call list,
 * scanning the mirrored ids, re-walking the calls still waiting) takes about
 * a minute for the first test below, over ten seconds for the second and
 * half a minute for the third on a quiet machine, against a second or two when each event costs its own
 * call. The verdicts are the exact contexts, never the time.
 */
const STREAMED = 40_000
const REVERSED = 20_000
/** A message of this many calls mirrored by as many `tool/call` events (a scan of the mirrored ids per event costs half a minute). */
const MIRRORED = 150_000

/** Folds events one by one, numbering them from 0. */
function folder(state = sessionContextUnit.init()) {
  let seq = state.seq + 1
  return {
    apply(type: string, data: unknown): number {
      const at = seq++
      state = applyContextEvent(state, { type, seq: SessionSeq(at), time: 0, data: data as never })
      return at
    },
    get state(): SessionContextState {
      return state
    },
  }
}

const callOf = (i: number): ToolCallBlock => ({ type: 'tool-call', id: `c${i}`, name: 'read', input: { path: `f${i}` } })

function callEvent(i: number) {
  return { turn: 1, callId: `c${i}`, name: 'read', arguments: { path: `f${i}` } }
}

function resultOf(i: number, seq: number): ContextMessage {
  return { role: 'tool', blocks: [{ type: 'tool-result', callId: `c${i}`, content: [{ type: 'text', text: `r${i}` }] }], seq }
}

function missingOf(i: number, seq: number): ContextMessage {
  return {
    role: 'tool',
    blocks: [{ type: 'tool-result', callId: `c${i}`, content: [{ type: 'text', text: MISSING_RESULT_TEXT }], isError: true }],
    seq,
    synthetic: true,
  }
}

const USER: ContextMessage = { role: 'user', blocks: [{ type: 'text', text: 'Read them all.' }], seq: 0 }

/** A user message, then a step whose `count` calls stream; returns the seq of the first call. */
function streamCalls(fold: ReturnType<typeof folder>, count: number): number {
  fold.apply('user/message', { text: 'Read them all.' })
  fold.apply('turn/start', { turn: 1 })
  fold.apply('step/start', { provider: 'p', model: 'm' })
  const first = fold.apply('tool/call', callEvent(0))
  for (let i = 1; i < count; i++) fold.apply('tool/call', callEvent(i))
  return first
}

describe('a step of very many streamed tool calls', () => {
  it(`${STREAMED} streamed calls: the open step holds each call once, in order, and keeps its checkpoint form; results in call order follow their calls`, () => {
    const fold = folder()
    const first = streamCalls(fold, STREAMED)
    const calls = Array.from({ length: STREAMED }, (_, i) => callOf(i))
    const open = fold.state
    // The open step, as a checkpoint stores it: the same JSON as a plain object (`from`: its step/start), a revived copy equal and valid.
    expect(JSON.stringify(open.open)).toBe(JSON.stringify({ seq: first, from: first - 1, text: '', reasoning: '', calls }))
    const revived = JSON.parse(JSON.stringify(open))
    expect(sessionContextStateSchema.safeParse(revived).success).toBe(true)
    expect(revived).toEqual(open)
    const streaming = contextView(open).messages
    expect(streaming).toHaveLength(2 + STREAMED)
    expect(streaming.slice(0, 2)).toEqual([USER, { role: 'assistant', blocks: calls, seq: first }])
    expect(streaming.slice(2)).toEqual(calls.map((_, i) => missingOf(i, first)))

    fold.apply('step/end', { usage: { input: 1, output: 1 }, finish: 'tool-calls' })
    const results: ContextMessage[] = []
    for (let i = 0; i < STREAMED; i++) results.push(resultOf(i, fold.apply('tool/result', { turn: 1, callId: `c${i}`, content: `r${i}` })))
    fold.apply('turn/end', { turn: 1, reason: 'completed' })
    const context = contextView(fold.state)
    expect(context.messages).toEqual([USER, { role: 'assistant', blocks: calls, seq: first, provider: 'p', model: 'm' }, ...results])
    expect(context.warnings).toMatchObject({ 'missing-result': 0, 'orphan-result': 0, 'invalid-event': 0 })

    // A fold resumed from the checkpoint of the open step ends in the same context.
    const resumed = folder(revived)
    resumed.apply('step/end', { usage: { input: 1, output: 1 }, finish: 'tool-calls' })
    for (let i = 0; i < STREAMED; i++) resumed.apply('tool/result', { turn: 1, callId: `c${i}`, content: `r${i}` })
    resumed.apply('turn/end', { turn: 1, reason: 'completed' })
    expect(contextView(resumed.state).messages).toEqual(context.messages)
  })

  it(`${REVERSED} streamed calls whose results arrive in reverse order: each result right after its call, in call order`, () => {
    const fold = folder()
    const first = streamCalls(fold, REVERSED)
    const results = new Array<ContextMessage>(REVERSED)
    for (let i = REVERSED - 1; i >= 0; i--)
      results[i] = resultOf(i, fold.apply('tool/result', { turn: 1, callId: `c${i}`, content: `r${i}` }))
    fold.apply('turn/end', { turn: 1, reason: 'completed' })
    const context = contextView(fold.state)
    const calls = Array.from({ length: REVERSED }, (_, i) => callOf(i))
    expect(context.messages).toEqual([USER, { role: 'assistant', blocks: calls, seq: first, provider: 'p', model: 'm' }, ...results])
    expect(context.warnings).toMatchObject({ 'missing-result': 0, 'orphan-result': 0 })
  })

  it(`a message of ${MIRRORED} calls mirrored by ${MIRRORED} tool/call events: the calls stay in the message, once`, () => {
    const fold = folder()
    fold.apply('user/message', { text: 'Read them all.' })
    const calls = Array.from({ length: MIRRORED }, (_, i) => callOf(i))
    const at = fold.apply('assistant/message', { turn: 1, text: '', blocks: calls })
    for (let i = 0; i < MIRRORED; i++) fold.apply('tool/call', callEvent(i))
    expect(fold.state.open).toBeNull()
    const context = contextView(fold.state)
    expect(context.messages).toEqual([USER, { role: 'assistant', blocks: calls, seq: at }, ...calls.map((_, i) => missingOf(i, at))])
  })

  it('a view after every result, a prune and a second step equals the view of a revived copy (no walk cached for it)', () => {
    const fold = folder()
    const first = streamCalls(fold, 200)
    const fresh = (state: SessionContextState) => contextView(JSON.parse(JSON.stringify(state)) as SessionContextState).messages
    const check = () => expect(contextView(fold.state).messages).toEqual(fresh(fold.state))
    check()
    for (let i = 0; i < 200; i++) {
      fold.apply('tool/result', { turn: 1, callId: `c${i}`, content: `r${i}` })
      check()
      if (i === 150) {
        // An early result's chunk is replaced; the calls still waiting are the same.
        fold.apply('compaction/prune', { callIds: ['c3', 'c140'] })
        check()
      }
    }
    fold.apply('assistant/message', { turn: 1, text: '', blocks: [callOf(200), callOf(201)] })
    check()
    fold.apply('tool/result', { turn: 1, callId: 'c200', content: 'r200' })
    const context = contextView(fold.state)
    expect(context.messages).toEqual(fresh(fold.state))
    expect(context.messages).toHaveLength(2 + 200 + 1 + 2)
    expect(context.messages[1]?.seq).toBe(first)
    expect(context.messages.at(-1)).toEqual(missingOf(201, context.messages.at(-3)?.seq as number))
    expect(context.warnings).toMatchObject({ 'missing-result': 1, 'orphan-result': 0, 'unmatched-prune': 0 })
    expect(context.messages[2 + 3]?.blocks[0]).toMatchObject({ callId: 'c3', content: [{ type: 'text', text: PRUNED_RESULT_TEXT }] })
  })

  it('an older state folded on keeps its own calls: a branch from it, from the newest state and from a revived one each holds its own', () => {
    const fold = folder()
    streamCalls(fold, 100)
    const older = fold.state
    for (let i = 100; i < 200; i++) fold.apply('tool/call', callEvent(i))
    const newest = fold.state
    const idsOf = (state: SessionContextState) => state.open?.calls.map((call) => call.id)
    const branch = (state: SessionContextState, id: string) =>
      applyContextEvent(state, {
        type: 'tool/call',
        seq: SessionSeq(state.seq + 1),
        time: 0,
        data: { callId: id, name: 'ls', arguments: {} },
      })
    const fromOlder = branch(older, 'x')
    const fromNewest = branch(newest, 'y')
    const fromNewestAgain = branch(newest, 'z')
    const fromRevived = branch(JSON.parse(JSON.stringify(newest)), 'w')
    const ids = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `c${from + i}`)
    expect(idsOf(older)).toEqual(ids(0, 100))
    expect(idsOf(newest)).toEqual(ids(0, 200))
    expect(idsOf(fromOlder)).toEqual([...ids(0, 100), 'x'])
    expect(idsOf(fromNewest)).toEqual([...ids(0, 200), 'y'])
    expect(idsOf(fromNewestAgain)).toEqual([...ids(0, 200), 'z'])
    expect(idsOf(fromRevived)).toEqual([...ids(0, 200), 'w'])
    // Folding on from a branch continues that branch only.
    expect(idsOf(branch(fromOlder, 'x2'))).toEqual([...ids(0, 100), 'x', 'x2'])
    expect(idsOf(fromNewest)).toEqual([...ids(0, 200), 'y'])
  })
})
