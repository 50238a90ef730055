import type { RestoredSession } from '@dsh/session'
import { toDshEvent, toDshHeader, type V0Event } from '@dsh/session-import-v0'

/**
 * Harness-shaped v0 events (written here from the v0 format: step boundaries
 * `{turn, step}`, harness usage names, the model named in the message
 * source, reasoning deltas, kept `session/title` and `compaction/*` events),
 * turned into dsh events by the importer's own converter.
 */

const T = 1_760_000_000_000

function events(list: ReadonlyArray<readonly [number, string, unknown, Partial<V0Event>?]>, first = 0): V0Event[] {
  return list.map(([time, type, data, extras], i) => ({ type, seq: first + i, time: T + time, data, ...extras }))
}

const MODEL = { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' }

export const V0_PARENT_EVENTS: readonly V0Event[] = events([
  [0, 'turn/start', { turn: 1 }],
  [
    1,
    'user/message',
    { id: 'u-1', role: 'user', content: [{ type: 'text', text: 'Plan the release.' }], source: { kind: 'user' } },
    { surfaceOp: 'append' },
  ],
  [2, 'step/start', { turn: 1, step: 0 }],
  [
    3,
    'request/header',
    { header: { config: { provider: 'deepseek', model: 'deepseek-chat' }, system: 'Be careful.' }, reason: 'initial' },
    { ignorable: true },
  ],
  [40, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'block-start', index: 0, blockType: 'reasoning' } }],
  [41, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'reasoning-delta', index: 0, text: 'Let me think.' } }],
  [60, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'block-start', index: 1, blockType: 'text' } }],
  [61, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'text-delta', index: 1, text: 'Here is a plan.' } }],
  [90, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'usage', usage: { inputTokens: 120, outputTokens: 40 } } }],
  [91, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'finish', reason: { kind: 'tool-calls' } } }],
  [
    100,
    'assistant/message',
    {
      turn: 1,
      step: 0,
      message: {
        id: 'a-1',
        role: 'assistant',
        content: [
          { type: 'reasoning', text: 'Let me think.' },
          { type: 'text', text: 'Here is a plan.' },
          { type: 'tool-call', id: 'call-1', name: 'read_file', arguments: '{"path":"README.md"}' },
        ],
        source: MODEL,
      },
      usage: { inputTokens: 120, outputTokens: 40, cacheReadTokens: 64 },
    },
    { sourceEventSeqs: [4, 5, 6, 7, 8, 9], surfaceOp: 'append' },
  ],
  [101, 'tool/call', { turn: 1, step: 0, callId: 'call-1', name: 'read_file', arguments: '{"path":"README.md"}' }],
  [
    131,
    'tool/result',
    {
      turn: 1,
      step: 0,
      message: {
        id: 'r-1',
        role: 'user',
        content: [{ type: 'tool-result', toolCallId: 'call-1', content: [{ type: 'text', text: '# dsh' }], isError: false }],
        source: { kind: 'tool', callId: 'call-1' },
      },
      meta: { bytes: 5 },
    },
    { surfaceOp: 'append' },
  ],
  [132, 'step/end', { turn: 1, step: 0 }],
  [133, 'turn/end', { turn: 1, reason: { kind: 'completed' } }],
  [134, 'session/title', { title: 'Release plan', messageSeqs: [1], source: { kind: 'fallback' } }],
  [200, 'compaction/start', { compactionId: 'k1', turn: null }, { ignorable: true }],
  [
    300,
    'compaction/summary',
    { compactionId: 'k1', turn: null, provider: 'deepseek', model: 'deepseek-chat', usage: { inputTokens: 500, outputTokens: 50 } },
  ],
  [301, 'compaction/end', { compactionId: 'k1', turn: null }],
])

/** One imported parent session. */
export const V0_TURN: RestoredSession = {
  ...toDshHeader({ id: 'v0-parent', createdAt: T, cwd: '/work', delegationDepth: 0 }),
  events: V0_PARENT_EVENTS.map(toDshEvent),
}

/** A forked child: the parent's log as its seed, then one short turn of its own (a subagent prompt, no usage). */
export const V0_CHILD: RestoredSession = {
  ...toDshHeader({
    id: 'v0-child',
    createdAt: T + 1000,
    cwd: '/work',
    parentSession: 'v0-parent',
    seedLength: V0_PARENT_EVENTS.length,
    origin: 'subagent',
    delegationDepth: 1,
  }),
  events: [
    ...V0_PARENT_EVENTS,
    ...events(
      [
        [1000, 'turn/start', { turn: 2 }],
        [
          1001,
          'user/message',
          { id: 'cu-2', role: 'user', content: [{ type: 'text', text: 'Do the task.' }], source: { kind: 'plugin', plugin: 'subagent' } },
          { surfaceOp: 'append' },
        ],
        [1002, 'step/start', { turn: 2, step: 0 }],
        [
          1030,
          'assistant/message',
          { turn: 2, step: 0, message: { id: 'ca-2', role: 'assistant', content: [{ type: 'text', text: 'Summary.' }], source: MODEL } },
          { sourceEventSeqs: [], surfaceOp: 'append' },
        ],
        [1031, 'step/end', { turn: 2, step: 0 }],
        [1032, 'turn/end', { turn: 2, reason: { kind: 'completed' } }],
      ],
      V0_PARENT_EVENTS.length,
    ),
  ].map(toDshEvent),
}
