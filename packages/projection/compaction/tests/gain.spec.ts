import { isDshError } from '@dsh/context'
import { type Session, SessionId } from '@dsh/session'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { estimateMessageTokens, estimateTokens, NO_GAIN_COMPACTION_ERROR, type SummarizeRequest, type Summarizer } from '../src/index.js'
import { converse, extractive, type Host, host } from './support.js'

const contextOf = (h: Host, session: Session) => h.ctx.require('sessionContext').contextOf(session)
const compactionTypes = (session: Session) => session.events.map((e) => e.type).filter((t) => t.startsWith('compaction/'))

/** A summarizer that answers `text` and records each request. */
function answering(text: (request: SummarizeRequest) => string): Summarizer & { requests: SummarizeRequest[] } {
  const requests: SummarizeRequest[] = []
  return {
    requests,
    async summarize(request) {
      requests.push(request)
      return { summary: text(request), provider: 'test', model: 'fixed' }
    },
  }
}

describe('a summary that would not shrink the context', () => {
  it('one short message: COMPACTION_NO_GAIN, the summary stored, compaction/end {error: no-gain} durable, the context unchanged', async () => {
    const { dir, cleanup } = tempDir('dsh-compaction-gain-')
    onTestFinished(cleanup)
    const h = await host(createJsonlPersistence({ root: dir }))
    const session = h.sessions.create()
    session.append('user/message', { text: 'hello' })
    const before = await contextOf(h, session)
    const error = await h.compaction.compact(session, { reason: 'manual', keep: 0 }).catch((e: unknown) => e)
    expect(isDshError(error, 'COMPACTION_NO_GAIN')).toBe(true)
    expect((error as Error).message).toMatch(/was not applied: its summary is about \d+ tokens, not fewer than the 6 of the 1 message/)
    expect(compactionTypes(session)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    expect(session.events.at(-1)!.data).toMatchObject({ error: NO_GAIN_COMPACTION_ERROR })
    const after = await contextOf(h, session)
    expect(after.messages).toEqual(before.messages)
    expect(after.compacting).toBe(false)
    expect(estimateTokens(after)).toBe(estimateTokens(before))
    await h.ctx.dispose()

    // The end reached the log: a fresh process reads the compaction as ended, not open.
    const reopened = createJsonlPersistence({ root: dir, readOnly: true })
    onTestFinished(() => reopened.close())
    const stored = await reopened.inspect(SessionId(session.id))
    expect(stored.events.at(-1)).toMatchObject({ type: 'compaction/end', data: { error: 'no-gain' } })
  })

  it('a summary estimated at exactly the tokens it replaces is no gain; one token fewer applies', async () => {
    // First the shadowed message's own text (one user message, exactly as long), then four characters less.
    const text = 'a question of forty characters, exactly.'
    const summarizer = answering(() => (summarizer.requests.length === 1 ? text : text.slice(0, text.length - 4)))
    const h = await host(createMemoryPersistence(), summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    session.append('user/message', { text })
    session.append('assistant/message', { turn: 1, text: 'ok' })
    await expect(h.compaction.compact(session, { reason: 'manual', keep: 1 })).rejects.toMatchObject({
      code: 'COMPACTION_NO_GAIN',
      details: { reason: 'no-gain', summaryTokens: 14, rangeTokens: 14 },
    })
    const result = await h.compaction.compact(session, { reason: 'manual', keep: 1 })
    expect(result.tokensAfter).toBe(result.tokensBefore - 1)
    expect((await contextOf(h, session)).messages[0]!.summary?.compactionId).toBe(result.compactionId)
  })

  it('a budget check past its budget rejects COMPACTION_NO_GAIN, and a later check with more to summarize compacts', async () => {
    const h = await host(createMemoryPersistence(), extractive)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    session.append('user/message', { text: 'hi' })
    session.append('assistant/message', { turn: 1, text: 'hello' })
    await expect(h.compaction.maybeCompact(session, { window: 10, keep: 0 })).rejects.toMatchObject({ code: 'COMPACTION_NO_GAIN' })
    expect((await contextOf(h, session)).messages).toHaveLength(2)
    converse(session, 3, 400)
    const checked = await h.compaction.maybeCompact(session, { window: 10, keep: 0 })
    expect(checked.compaction!.tokensAfter).toBeLessThan(checked.compaction!.tokensBefore)
    expect(estimateMessageTokens((await contextOf(h, session)).messages[0]!)).toBe(checked.compaction!.tokensAfter)
  })
})
