import { Context } from '@dsh/context'
import { ATTACHMENT_INLINE_MAX_BYTES, type ContentBlock, type SessionEventMap, SessionStore } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { FOLD_WARNINGS, type SessionContextState, sessionContextStateSchema } from '../src/index.js'

describe('the content vocabulary', () => {
  it('events carry blocks beside the text older readers use, and step/compaction events in dsh and harness shapes', () => {
    const sessions = new SessionStore(new Context())
    const session = sessions.create()
    const blocks: ContentBlock[] = [
      { type: 'text', text: 'look at this' },
      { type: 'image', attachment: { digest: 'a'.repeat(64), mediaType: 'image/png', size: 120_000 } },
    ]
    session.append('user/message', { text: 'look at this', blocks })
    session.append('step/start', { model: 'm', provider: 'p' })
    session.append('step/start', { turn: 1, step: 0 })
    session.append('assistant/message', {
      turn: 1,
      text: 'done',
      blocks: [
        { type: 'reasoning', text: 'think', signature: 'opaque' },
        { type: 'text', text: 'done' },
        { type: 'tool-call', id: 'c1', name: 'read', input: { path: 'a' } },
      ],
    })
    session.append('tool/result', { turn: 1, callId: 'c1', content: 'x', blocks: [{ type: 'text', text: 'x' }] })
    session.append('step/end', { usage: { input: 10, output: 5, cacheRead: 3, reasoning: 2 }, finish: 'tool-calls' })
    session.append('compaction/start', { reason: 'size' })
    session.append('compaction/start', { compactionId: 'k', turn: null })
    const summary: SessionEventMap['compaction/summary'] = {
      compactionId: 'k',
      summary: [{ type: 'text', text: 'so far' }],
      from: 0,
      to: 5,
      usage: { inputTokens: 1, outputTokens: 1 },
      provider: 'p',
      model: 'm',
    }
    session.append('compaction/summary', summary)
    session.append('compaction/end', { compactionId: 'k', turn: null, error: 'interrupted' })
    session.append('compaction/prune', { callIds: ['c1'] })
    expect(session.events.map((event) => event.type)).toContain('compaction/prune')
    expect(ATTACHMENT_INLINE_MAX_BYTES).toBeGreaterThan(0)
  })

  it('the checkpoint schema accepts an empty state and refuses a malformed one', () => {
    const empty: SessionContextState = {
      seq: -1,
      chunks: [],
      open: null,
      mirrors: [],
      compactions: [],
      compaction: null,
      step: null,
      provider: null,
      model: null,
      warnings: Object.fromEntries(FOLD_WARNINGS.map((w) => [w, 0])) as SessionContextState['warnings'],
    }
    expect(sessionContextStateSchema.safeParse(JSON.parse(JSON.stringify(empty))).success).toBe(true)
    expect(sessionContextStateSchema.safeParse({ ...empty, chunks: [[{ role: 'robot', blocks: [], seq: 0 }]] }).success).toBe(false)
  })
})
