import type { ScriptedEvent } from '@dsh/session-projection/testing'

const DIGEST = 'ab'.repeat(32)
export const IMAGE = { type: 'image', attachment: { digest: DIGEST, mediaType: 'image/png', size: 70_000, width: 10, height: 10 } }

/** One turn in the vocabulary dsh's OpenAI driver writes: streamed reasoning and text, two calls, their results, a final message. */
export const OLD_TURN: readonly ScriptedEvent[] = [
  { type: 'user/message', data: { text: 'hi' } },
  { type: 'turn/start', data: { turn: 1 } },
  { type: 'assistant/reasoning', data: { turn: 1, index: 0, delta: 'think' } },
  { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'Let me ' } },
  { type: 'assistant/chunk', data: { turn: 1, index: 1, delta: 'look.' } },
  { type: 'tool/call', data: { turn: 1, callId: 'c1', name: 'read', arguments: { path: 'a' } } },
  { type: 'tool/call', data: { turn: 1, callId: 'c2', name: 'grep', arguments: 'not json' } },
  { type: 'tool/result', data: { turn: 1, callId: 'c1', content: 'A' } },
  { type: 'tool/result', data: { turn: 1, callId: 'c2', content: { code: 'E', message: 'bad' }, isError: true } },
  { type: 'assistant/chunk', data: { turn: 1, index: 2, delta: 'Done' } },
  { type: 'assistant/message', data: { turn: 1, text: 'Done.', usage: { input: 1, output: 2 }, provider: 'p', model: 'm' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
]

export const OLD_TURN_TRANSCRIPT = [
  'user: hi',
  'assistant: (think) | Let me look. | call c1 read {"path":"a"} | call c2 grep "not json"',
  'tool: result c1: A',
  'tool: result c2 error: Error E: bad',
  'assistant: Done.',
]

/** One turn in the block vocabulary: steps with model and usage, an assistant message with blocks whose call `tool/call` mirrors. */
export const BLOCK_TURN: readonly ScriptedEvent[] = [
  { type: 'user/message', data: { text: 'see', blocks: [{ type: 'text', text: 'see' }, IMAGE] } },
  { type: 'turn/start', data: { turn: 2 } },
  { type: 'step/start', data: { model: 'm2', provider: 'p2' } },
  {
    type: 'assistant/message',
    data: {
      turn: 2,
      text: 'ok',
      blocks: [
        { type: 'reasoning', text: 'hmm', signature: 'sig' },
        { type: 'text', text: 'ok' },
        { type: 'tool-call', id: 'c3', name: 'read', input: { path: 'b' } },
      ],
    },
  },
  { type: 'tool/call', data: { turn: 2, callId: 'c3', name: 'read', arguments: { path: 'b' } } },
  { type: 'tool/result', data: { turn: 2, callId: 'c3', content: 'B', blocks: [{ type: 'text', text: 'B' }, IMAGE] } },
  { type: 'step/end', data: { usage: { input: 10, output: 3, cacheRead: 2 }, finish: 'tool-calls' } },
  { type: 'step/start', data: { model: 'm2', provider: 'p2' } },
  {
    type: 'assistant/message',
    data: {
      turn: 2,
      text: 'fin',
      blocks: [
        { type: 'text', text: 'fin' },
        { type: 'chart', points: [1, 2] },
      ],
    },
  },
  { type: 'step/end', data: { usage: { input: 12, output: 1 }, finish: 'stop' } },
  { type: 'turn/end', data: { turn: 2, reason: 'completed' } },
]

export const BLOCK_TURN_TRANSCRIPT = [
  'user: see | [image]',
  'assistant: (hmm) | ok | call c3 read {"path":"b"}',
  'tool: result c3: B|[image]',
  'assistant: fin | [chart]',
]

/** A compaction of `[from, to)` that completes. */
export function compaction(id: string, from: number, to: number, text: string): ScriptedEvent[] {
  return [
    { type: 'compaction/start', data: { compactionId: id, turn: null } },
    { type: 'compaction/summary', data: { compactionId: id, summary: [{ type: 'text', text }], from, to, provider: 'p', model: 'sum' } },
    { type: 'compaction/end', data: { compactionId: id, turn: null } },
  ]
}

/** Everything the unit folds, for the registry's contract suite. */
export const FULL_SCRIPT: readonly ScriptedEvent[] = [
  ...OLD_TURN,
  ...compaction('k1', 0, 12, 'S1'),
  ...BLOCK_TURN,
  { type: 'compaction/prune', data: { callIds: ['c3'] } },
  { type: 'compaction/start', data: { compactionId: 'k2', turn: null } },
  { type: 'compaction/summary', data: { compactionId: 'k2', summary: [{ type: 'text', text: 'lost' }], from: 0, to: 20 } },
  { type: 'compaction/end', data: { compactionId: 'k2', turn: null, error: 'interrupted' } },
  { type: 'subagent/notice', data: { kind: 'report', child: 'c4', text: 'done' } },
  { type: 'suite/other', data: { text: 'a type the fold does not know' } },
  { type: 'user/message', data: { text: 'again' } },
]
