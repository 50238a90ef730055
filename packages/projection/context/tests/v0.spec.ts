import { toDshEvent, type V0Event } from '@dsh/session-import-v0'
import { projectionUnitSuite } from '@dsh/session-projection/testing'
import { describe, expect, it } from 'vitest'
import { sessionContextUnit } from '../src/index.js'
import { liveHost, transcript } from './helpers.js'

/**
 * A harness log (written here from the v0 format: message events with
 * `surfaceOp`, the assistant's content blocks with raw tool arguments,
 * results as `tool-result` blocks with `toolCallId`, a compaction whose
 * summary names the shadowed message events and whose replacement node
 * follows it), turned into dsh events by the importer's own converter.
 */
const MODEL = { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' }
const LINES: readonly (readonly [string, unknown, Record<string, unknown>?])[] = [
  ['turn/start', { turn: 1 }],
  [
    'user/message',
    { id: 'u1', role: 'user', content: [{ type: 'text', text: 'Plan it.' }], source: { kind: 'user' } },
    { surfaceOp: 'append' },
  ],
  ['step/start', { turn: 1, step: 0 }],
  ['assistant/chunk', { turn: 1, step: 0, chunk: { type: 'text-delta', index: 1, text: 'Here.' } }],
  [
    'assistant/message',
    {
      turn: 1,
      step: 0,
      message: {
        id: 'a1',
        role: 'assistant',
        content: [
          { type: 'reasoning', text: 'Think.' },
          { type: 'text', text: 'Here.' },
          { type: 'tool-call', id: 'call-1', name: 'read_file', arguments: '{"path":"README.md"}' },
        ],
        source: MODEL,
      },
      usage: { inputTokens: 10, outputTokens: 4 },
    },
    { sourceEventSeqs: [3], surfaceOp: 'append' },
  ],
  ['tool/call', { turn: 1, step: 0, callId: 'call-1', name: 'read_file', arguments: '{"path":"README.md"}' }],
  [
    'tool/result',
    {
      turn: 1,
      step: 0,
      message: {
        id: 'r1',
        role: 'user',
        content: [{ type: 'tool-result', toolCallId: 'call-1', content: [{ type: 'text', text: '# dsh' }], isError: false }],
        source: { kind: 'tool', callId: 'call-1' },
      },
    },
    { surfaceOp: 'append' },
  ],
  ['step/end', { turn: 1, step: 0 }],
  ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
  ['compaction/start', { compactionId: 'k1', turn: null }, { ignorable: true }],
  [
    'compaction/summary',
    {
      compactionId: 'k1',
      summary: [{ type: 'text', text: 'The user asked for a plan; README read.' }],
      shadowedRange: { start: 1, end: 6 },
      shadowedSeqs: [1, 4, 6],
      shadowedTokenCount: 30,
      provider: 'deepseek',
      model: 'deepseek-chat',
    },
  ],
  [
    'user/message',
    {
      id: 'u-sum',
      role: 'user',
      content: [{ type: 'text', text: 'The user asked for a plan; README read.' }],
      source: { kind: 'plugin', plugin: 'compaction' },
    },
    { sourceEventSeqs: [1, 4, 6], surfaceOp: { op: 'replace', start: 1, end: 6 } },
  ],
  ['compaction/end', { compactionId: 'k1', turn: null }],
  ['turn/start', { turn: 2 }],
  [
    'user/message',
    { id: 'u2', role: 'user', content: [{ type: 'text', text: 'Go on.' }], source: { kind: 'user' } },
    { surfaceOp: 'append' },
  ],
]

const T = 1_760_000_000_000
const V0_EVENTS = LINES.map(([type, data, extras], seq) => toDshEvent({ type, seq, time: T + seq, data, ...extras } as V0Event))
const BEFORE_COMPACTION = V0_EVENTS.slice(0, 9)

describe('sessionContext over an imported harness log', () => {
  it('reads the message blocks the import keeps beside the text, and the model from the message source', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create({ seed: BEFORE_COMPACTION, inheritedEventCount: BEFORE_COMPACTION.length })
    const context = contextOf(session)
    expect(transcript(context)).toEqual([
      'user: Plan it.',
      'assistant: (Think.) | Here. | call call-1 read_file {"path":"README.md"}',
      'tool: result call-1: # dsh',
    ])
    expect(context.messages[1]?.blocks[2]).toEqual({
      type: 'tool-call',
      id: 'call-1',
      name: 'read_file',
      input: { path: 'README.md' },
      arguments: '{"path":"README.md"}',
    })
    expect(context).toMatchObject({ provider: 'deepseek', model: 'deepseek-chat' })
    expect(context.step).toMatchObject({ ended: true, provider: null, model: null })
    expect(Object.values(context.warnings).every((n) => n === 0)).toBe(true)
  })

  it('applies a harness compaction by its shadowed message events, once (its replacement node is not a second summary)', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create({ seed: V0_EVENTS, inheritedEventCount: V0_EVENTS.length })
    const context = contextOf(session)
    expect(transcript(context)).toEqual(['user: The user asked for a plan; README read.', 'user: Go on.'])
    expect(context.compaction).toEqual({ seq: 10, compactionId: 'k1', from: 1, to: 7, provider: 'deepseek', model: 'deepseek-chat' })
  })
})

projectionUnitSuite('sessionContext over imported harness events', {
  unit: sessionContextUnit,
  script: V0_EVENTS.map(({ type, data, time }) => ({ type, data, time })),
  neverThrows: true,
})
