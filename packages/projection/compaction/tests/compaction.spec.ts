import { isDshError } from '@dsh/context'
import { type Session, SessionId } from '@dsh/session'
import { createMemoryPersistence, MemoryPersistenceStorage } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it, onTestFinished } from 'vitest'
import { estimateTokens, type Summarizer } from '../src/index.js'
import { converse, extractive, host } from './support.js'

const contextOf = async (h: Awaited<ReturnType<typeof host>>, session: Session) => h.ctx.require('sessionContext').contextOf(session)
const types = (session: Session) => session.events.map((e) => e.type)

describe('compact', () => {
  it('replaces all but the newest messages by one summary; the log keeps every event, across a reopen', async () => {
    const { dir, cleanup } = tempDir('dsh-compaction-')
    onTestFinished(cleanup)
    const h = await host(createJsonlPersistence({ root: dir }))
    const session = h.sessions.create()
    converse(session, 5, 400)
    const original = session.events.map((e) => ({ type: e.type, data: e.data }))
    const before = await contextOf(h, session)
    expect(before.messages).toHaveLength(20)

    const result = await h.compaction.compact(session, { reason: 'manual', keep: 4 })
    const after = await contextOf(h, session)
    expect(after.messages).toHaveLength(5)
    expect(after.messages[0]!.summary).toMatchObject({ compactionId: result.compactionId, from: 1, to: result.to, model: 'extractive' })
    expect(after.messages.slice(1).map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(result.shadowed).toBe(16)
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore)
    expect(result.tokensBefore).toBe(estimateTokens(before))
    expect(types(session).slice(-3)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    await h.ctx.dispose()

    // Nothing was rewritten: a fresh process reads every original event, then the compaction's three.
    const reopened = createJsonlPersistence({ root: dir, readOnly: true })
    const stored = await reopened.inspect(SessionId(session.id))
    expect(stored.events.slice(0, original.length).map((e) => ({ type: e.type, data: e.data }))).toEqual(original)
    expect(stored.events).toHaveLength(original.length + 3)
    await reopened.close()
  })

  it('a second compaction summarizes the first summary with what followed it', async () => {
    const h = await host(createMemoryPersistence())
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    await h.compaction.compact(session, { reason: 'manual', keep: 0 })
    converse(session, 3, 100, 4)
    const second = await h.compaction.compact(session, { reason: 'manual', keep: 4 })
    const context = await contextOf(h, session)
    expect(second.from).toBe(1)
    expect(context.messages).toHaveLength(5)
    expect(context.messages[0]!.summary?.compactionId).toBe(second.compactionId)
  })

  it('a summarizer failure writes compaction/end {error}, throws typed, and leaves the context as it was', async () => {
    const failing: Summarizer = {
      async summarize() {
        throw new Error('model unavailable')
      },
    }
    const h = await host(createMemoryPersistence(), failing)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    const before = await contextOf(h, session)
    const error = await h.compaction.compact(session, { reason: 'manual' }).catch((e: unknown) => e)
    expect(isDshError(error, 'COMPACTION_SUMMARIZER_FAILED')).toBe(true)
    expect((error as Error).message).toContain('model unavailable')
    expect(session.events.at(-1)).toMatchObject({ type: 'compaction/end', data: { error: 'model unavailable' } })
    const after = await contextOf(h, session)
    expect(after.messages).toEqual(before.messages)
    expect(after.compacting).toBe(false)
  })

  it('an empty summary is a failure too', async () => {
    const h = await host(createMemoryPersistence(), { summarize: async () => ({ summary: '  ' }) })
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    await expect(h.compaction.compact(session, { reason: 'manual' })).rejects.toMatchObject({ code: 'COMPACTION_SUMMARIZER_FAILED' })
  })

  it('is refused typed: no summarizer, nothing to compact, bad options, one at a time per session', async () => {
    const bare = await host(createMemoryPersistence(), null)
    onTestFinished(() => bare.ctx.dispose())
    const s = bare.sessions.create()
    converse(s, 2)
    await expect(bare.compaction.compact(s, { reason: 'manual' })).rejects.toMatchObject({ code: 'COMPACTION_NO_SUMMARIZER' })

    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    const slow: Summarizer = {
      async summarize(request) {
        await held
        return extractive.summarize(request)
      },
    }
    const h = await host(createMemoryPersistence(), slow)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 1)
    await expect(h.compaction.compact(session, { reason: 'manual', keep: 4 })).rejects.toMatchObject({
      code: 'COMPACTION_NOTHING_TO_COMPACT',
    })
    await expect(h.compaction.compact(session, { reason: 'manual', keep: -1 })).rejects.toMatchObject({
      code: 'COMPACTION_INVALID_OPTIONS',
    })
    await expect(h.compaction.compact(session, { reason: '' })).rejects.toMatchObject({ code: 'COMPACTION_INVALID_OPTIONS' })
    converse(session, 2, 100, 2)
    const first = h.compaction.compact(session, { reason: 'manual' })
    await expect(h.compaction.compact(session, { reason: 'manual' })).rejects.toMatchObject({ code: 'COMPACTION_BUSY' })
    release()
    await first
    expect(types(session).filter((t) => t.startsWith('compaction/'))).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
  })

  it('a fork after a compaction inherits the compacted context', async () => {
    const h = await host(createMemoryPersistence())
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 4)
    await h.compaction.compact(session, { reason: 'manual', keep: 4 })
    const compacted = await contextOf(h, session)
    const child = h.sessions.fork(session)
    expect((await contextOf(h, child)).messages).toEqual(compacted.messages)
    child.append('user/message', { text: 'And then?' })
    const forked = await contextOf(h, child)
    expect(forked.messages).toHaveLength(compacted.messages.length + 1)
    expect(forked.messages[0]!.summary).toBeDefined()
  })
})

describe('maybeCompact', () => {
  it('compacts only when the estimate reaches the fraction of the window', async () => {
    const h = await host(createMemoryPersistence())
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 4, 400)
    const estimate = await h.compaction.estimate(session)
    const under = await h.compaction.maybeCompact(session, { window: Math.ceil(estimate / 0.8) + 10 })
    expect(under).toMatchObject({ estimate, compaction: undefined })
    expect(types(session)).not.toContain('compaction/start')
    const over = await h.compaction.maybeCompact(session, { window: Math.ceil(estimate / 0.8) - 1 })
    expect(over.budget).toBeLessThanOrEqual(estimate)
    expect(over.compaction?.tokensAfter).toBeLessThan(estimate)
    expect(session.events.find((e) => e.type === 'compaction/start')?.data).toMatchObject({ reason: 'budget' })
    await expect(h.compaction.maybeCompact(session, { window: 0 })).rejects.toMatchObject({ code: 'COMPACTION_INVALID_OPTIONS' })
    await expect(h.compaction.maybeCompact(session, { window: 100, fraction: 1.5 })).rejects.toMatchObject({
      code: 'COMPACTION_INVALID_OPTIONS',
    })
  })
})

describe('estimate', () => {
  it("counts a child's notice (a block a driver phrases into text) by its size, like the text it becomes", async () => {
    const h = await host(createMemoryPersistence())
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    const empty = await h.compaction.estimate(session)
    const text = 'the child read every chunk. '.repeat(100)
    session.append('subagent/notice', { kind: 'settled', subagentId: 'c1', reason: 'completed', text })
    const context = await contextOf(h, session)
    expect(context.messages.map((m) => m.blocks.map((b) => b.type))).toEqual([['notice']])
    expect((await h.compaction.estimate(session)) - empty).toBeGreaterThanOrEqual(text.length / 4)
  })
})

describe('prune', () => {
  it('replaces old large tool results by a placeholder, keeping the newest and the small ones; no model is called', async () => {
    const h = await host(createMemoryPersistence(), null)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3, 5_000)
    converse(session, 1, 10, 4)
    converse(session, 2, 5_000, 5)
    const result = await h.compaction.prune(session, { keepNewest: 2, minChars: 1_000 })
    expect(result.callIds).toEqual(['c1', 'c2', 'c3'])
    expect(result.chars).toBe(15_000)
    expect(session.events.at(-1)).toMatchObject({ type: 'compaction/prune', data: { callIds: ['c1', 'c2', 'c3'] } })
    const context = await contextOf(h, session)
    const results = context.messages.filter((m) => m.role === 'tool').map((m) => JSON.stringify(m.blocks).length)
    expect(results.slice(0, 3).every((n) => n < 500)).toBe(true)
    expect(results.slice(4).every((n) => n > 5_000)).toBe(true)
    // Pruned results are not pruned again.
    expect(await h.compaction.prune(session, { keepNewest: 2, minChars: 1_000 })).toEqual({ callIds: [], chars: 0 })
    expect(session.events.filter((e) => e.type === 'compaction/prune')).toHaveLength(1)
  })
})

describe('crash repair', () => {
  it('a load closes a compaction left open with compaction/end {error: interrupted}; the context is the one before it, and the next compaction succeeds', async () => {
    const storage = new MemoryPersistenceStorage()
    const first = await host(createMemoryPersistence({ storage }))
    const session = first.sessions.create()
    converse(session, 3)
    const before = (await contextOf(first, session)).messages
    session.append('compaction/start', { compactionId: 'k1', reason: 'manual' })
    session.append('compaction/summary', { compactionId: 'k1', summary: [{ type: 'text', text: 'half' }], from: 0, to: 8 })
    await first.ctx.dispose()

    const second = await host(createMemoryPersistence({ storage }))
    onTestFinished(() => second.ctx.dispose())
    const loaded = await second.persistence.load(SessionId(session.id))
    expect(loaded.repaired).toBe(true)
    expect(loaded.events.at(-1)).toMatchObject({ type: 'compaction/end', data: { compactionId: 'k1', error: 'interrupted' } })
    const restored = second.sessions.restore(loaded)
    expect((await contextOf(second, restored)).messages).toEqual(before)
    const result = await second.compaction.compact(restored, { reason: 'manual' })
    expect((await contextOf(second, restored)).messages[0]!.summary?.compactionId).toBe(result.compactionId)
  })
})
