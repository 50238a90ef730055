import { describe, expect, it } from 'vitest'
import { MISSING_RESULT_TEXT } from '../src/index.js'
import { liveHost, play, transcript } from './helpers.js'
import { BLOCK_TURN, BLOCK_TURN_TRANSCRIPT, IMAGE, OLD_TURN, OLD_TURN_TRANSCRIPT } from './scripts.js'

describe('sessionContext: messages of blocks from both vocabularies', () => {
  it('folds a log of the older text events as the driver reads it: streamed text and reasoning, calls closing the step, results, the final message', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, OLD_TURN)
    const context = contextOf(session)
    expect(transcript(context)).toEqual(OLD_TURN_TRANSCRIPT)
    // Raw arguments that are not JSON are kept as the model wrote them.
    expect(context.messages[1]?.blocks[3]).toEqual({ type: 'tool-call', id: 'c2', name: 'grep', input: 'not json', arguments: 'not json' })
    expect(context.messages.at(-1)).toMatchObject({ role: 'assistant', provider: 'p', model: 'm', seq: 10 })
    expect(context).toMatchObject({ provider: 'p', model: 'm', seq: 11, compaction: null, compacting: false })
    expect(Object.values(context.warnings).every((n) => n === 0)).toBe(true)
  })

  it('folds block events: images by reference, reasoning with its signature, mirrored tool/call events not doubled, unknown blocks kept and counted', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, BLOCK_TURN)
    const context = contextOf(session)
    expect(transcript(context)).toEqual(BLOCK_TURN_TRANSCRIPT)
    expect(context.messages[0]?.blocks[1]).toEqual(IMAGE)
    expect(context.messages[1]?.blocks[0]).toEqual({ type: 'reasoning', text: 'hmm', signature: 'sig' })
    expect(context.messages[2]?.blocks[0]).toEqual({ type: 'tool-result', callId: 'c3', content: [{ type: 'text', text: 'B' }, IMAGE] })
    expect(context.messages[3]?.blocks[1]).toEqual({ type: 'chart', points: [1, 2] })
    expect(context.step).toEqual({ seq: 7, provider: 'p2', model: 'm2', ended: true, usage: { input: 12, output: 1 }, finish: 'stop' })
    expect(context.warnings['unknown-block']).toBe(1)
    expect(context.warnings['invalid-event']).toBe(0)
  })

  it('reads the harness spellings: toolCallId, raw arguments, image references by attachmentId and bytes', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    const hex = 'cd'.repeat(32)
    session.append('user/message', {
      text: '',
      blocks: [{ type: 'image', attachment: { attachmentId: `sha256:${hex}`, mediaType: 'image/png', bytes: 9, width: 1, height: 2 } }],
    } as never)
    session.append('assistant/message', {
      turn: 1,
      text: '',
      blocks: [{ type: 'tool-call', id: 'h1', name: 'ls', arguments: '{"dir":"."}' }],
    } as never)
    session.append('tool/result', {
      turn: 1,
      callId: 'h1',
      content: null,
      blocks: [{ type: 'tool-result', toolCallId: 'h1', content: [{ type: 'text', text: 'x' }] }],
    } as never)
    const [user, assistant, tool] = contextOf(session).messages
    expect(user?.blocks[0]).toEqual({ type: 'image', attachment: { digest: hex, mediaType: 'image/png', size: 9, width: 1, height: 2 } })
    expect(assistant?.blocks[0]).toEqual({ type: 'tool-call', id: 'h1', name: 'ls', input: { dir: '.' }, arguments: '{"dir":"."}' })
    expect(tool?.blocks[0]).toMatchObject({ type: 'tool-result', callId: 'h1' })
  })

  it('drops blocks of a known type with a bad shape and counts them; an attachment above the inline threshold may not carry its bytes', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    session.append('user/message', {
      text: 'x',
      blocks: [
        { type: 'text', text: 'kept' },
        { type: 'text', text: 3 },
        { type: 'image', attachment: { digest: 'nothex', mediaType: 'image/png', size: 1 } },
        { type: 'file', attachment: { digest: 'ef'.repeat(32), mediaType: 'application/pdf', size: 100_000, data: 'AAAA' } },
        { type: 'file', attachment: { digest: 'ef'.repeat(32), mediaType: 'text/plain', size: 3, data: 'YWJj', name: 'a.txt' } },
      ],
    } as never)
    const context = contextOf(session)
    expect(context.messages[0]?.blocks).toEqual([
      { type: 'text', text: 'kept' },
      { type: 'file', attachment: { digest: 'ef'.repeat(32), mediaType: 'text/plain', size: 3, data: 'YWJj', name: 'a.txt' } },
    ])
    expect(context.warnings['invalid-block']).toBe(3)
  })
})

describe('sessionContext: tool calls are paired at view time', () => {
  it('a call without a result gets a synthetic error result right after its message, so no call dangles', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    session.append('user/message', { text: 'go' })
    session.append('turn/start', { turn: 1 })
    session.append('tool/call', { turn: 1, callId: 'a', name: 'x', arguments: {} })
    session.append('tool/call', { turn: 1, callId: 'b', name: 'y', arguments: {} })
    session.append('tool/result', { turn: 1, callId: 'b', content: 'B' })
    session.append('turn/end', { turn: 1, reason: 'interrupted' })
    session.append('user/message', { text: 'next' })
    const context = contextOf(session)
    expect(transcript(context)).toEqual([
      'user: go',
      'assistant: call a x {} | call b y {}',
      `tool: result a error: ${MISSING_RESULT_TEXT}`,
      'tool: result b: B',
      'user: next',
    ])
    expect(context.messages[2]?.synthetic).toBe(true)
    expect(context.warnings['missing-result']).toBe(1)
  })

  it('a result whose call is not in the context is left out and counted; a call still streaming is in the view', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    session.append('user/message', { text: 'go' })
    session.append('tool/result', { turn: 1, callId: 'ghost', content: 'G' })
    session.append('assistant/chunk', { turn: 1, index: 0, delta: 'typing' })
    const context = contextOf(session)
    expect(transcript(context)).toEqual(['user: go', 'assistant: typing'])
    expect(context.warnings['orphan-result']).toBe(1)
  })
})

describe('sessionContext: cost', () => {
  it('a live context folds each event once: contextOf adds no apply and reads no log, however long the session', () => {
    const { sessions, projections, contextOf } = liveHost()
    const session = sessions.create()
    for (let turn = 1; turn <= 200; turn++)
      play(
        session,
        OLD_TURN.map((e) => ({ ...e, data: { ...(e.data as object), turn } })),
      )
    const events = session.seq
    contextOf(session)
    const { applies, logReads } = projections.metrics
    // The cell was built as the events arrived: one apply per event, none from the log.
    expect(applies).toBe(events)
    expect(logReads).toBe(0)
    const context = contextOf(session)
    expect(projections.metrics.applies).toBe(events)
    expect(context.messages.length).toBe(200 * OLD_TURN_TRANSCRIPT.length)
    // A new event costs one apply.
    session.append('user/message', { text: 'more' })
    contextOf(session)
    expect(projections.metrics.applies).toBe(events + 1)
  })

  it('an append copies at most one chunk of messages: earlier chunks keep their reference', () => {
    const { sessions, projections } = liveHost()
    const session = sessions.create()
    for (let i = 0; i < 200; i++) session.append('user/message', { text: `m${i}` })
    const before = projections.snapshot(session, ['sessionContext']).sessionContext
    session.append('user/message', { text: 'last' })
    const after = projections.snapshot(session, ['sessionContext']).sessionContext
    expect(before?.chunks.length).toBe(4)
    expect(after?.chunks.slice(0, 3).every((chunk, i) => chunk === before?.chunks[i])).toBe(true)
  })
})
