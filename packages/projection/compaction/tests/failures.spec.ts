import { isDshError } from '@dsh/context'
import type { Session, StoredSessionEvent } from '@dsh/session'
import {
  type AppendTarget,
  createMemoryPersistence,
  type SessionPersistence,
  SessionPersistenceError,
  type SessionRangeObservation,
} from '@dsh/session-persistence'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { describe, expect, it, onTestFinished } from 'vitest'
import { type ShadowedRange, type Summarizer, shadowedRange } from '../src/index.js'
import { MAX_STORED_ERROR_CHARS } from '../src/summary.js'
import { converse, extractive, type Host, host } from './support.js'

const contextOf = (h: Host, session: Session) => h.ctx.require('sessionContext').contextOf(session)
const compactionTypes = (session: Session) => session.events.map((e) => e.type).filter((t) => t.startsWith('compaction/'))

/** A summarizer whose answers a test sets per call; `extractive` once they run out. */
function scripted(answers: Array<(request: Parameters<Summarizer['summarize']>[0]) => Promise<unknown>>): Summarizer & { calls: number } {
  const summarizer = {
    calls: 0,
    async summarize(request: Parameters<Summarizer['summarize']>[0]) {
      const answer = answers[summarizer.calls++]
      return (answer === undefined ? extractive.summarize(request) : answer(request)) as ReturnType<Summarizer['summarize']>
    },
  }
  return summarizer
}

/** A real in-memory backend whose next appends fail, as a full or vanished disk does (nothing written). */
function failingAppends(inner: SessionPersistence): { persistence: SessionPersistence; fail: (count: number) => void } {
  let failures = 0
  const persistence = new Proxy(inner, {
    get(target, name) {
      if (name !== 'append') {
        const value: unknown = Reflect.get(target, name)
        return typeof value === 'function' ? value.bind(target) : value
      }
      return async (at: AppendTarget, events: readonly StoredSessionEvent[]) => {
        if (failures > 0) {
          failures--
          throw new SessionPersistenceError('SESSION_PERSISTENCE_IO', 'injected: the disk went away')
        }
        return target.append(at, events)
      }
    },
  })
  return {
    persistence,
    fail: (count) => {
      failures += count
    },
  }
}

describe('a summarizer that stalls', () => {
  it('an abort of the signal rejects CANCELLED without waiting for it, ends the compaction, and the session compacts again', async () => {
    const controller = new AbortController()
    const summarizer = scripted([
      () => {
        controller.abort()
        return new Promise(() => {})
      },
    ])
    const h = await host(createMemoryPersistence(), summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    const before = await contextOf(h, session)
    const error = await h.compaction.compact(session, { reason: 'manual', signal: controller.signal }).catch((e: unknown) => e)
    expect(isDshError(error, 'CANCELLED')).toBe(true)
    expect(session.events.at(-1)).toMatchObject({ type: 'compaction/end', data: { error: 'cancelled' } })
    expect((await contextOf(h, session)).messages).toEqual(before.messages)
    const result = await h.compaction.compact(session, { reason: 'manual' })
    expect((await contextOf(h, session)).messages[0]!.summary?.compactionId).toBe(result.compactionId)
  })

  it('an aborted signal writes nothing and asks no summarizer', async () => {
    const summarizer = scripted([])
    const h = await host(createMemoryPersistence(), summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    const events = session.events.length
    await expect(h.compaction.compact(session, { reason: 'manual', signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'CANCELLED',
    })
    expect(session.events).toHaveLength(events)
    expect(summarizer.calls).toBe(0)
  })
})

describe('a summarizer that answers what cannot be stored', () => {
  const answers: Record<string, unknown> = {
    'no answer': null,
    'a summary of strings': { summary: ['not a block'] },
    'only blocks the model cannot read': { summary: [{ type: 'mystery', text: 'x' }] },
    'a block that is not JSON': { summary: [{ type: 'text', text: 'ok', extra: undefined }] },
    'usage that is not JSON': { summary: 'A fine summary.', usage: { input: Number.NaN, output: 1 } },
    'a summary over EVENT_MAX_BYTES': { summary: 'x'.repeat(EVENT_MAX_BYTES + 1) },
  }
  for (const [name, answer] of Object.entries(answers)) {
    it(`${name}: COMPACTION_SUMMARIZER_FAILED, no summary stored, the compaction ended and durable, the context unchanged`, async () => {
      const h = await host(createMemoryPersistence(), scripted([async () => answer]))
      onTestFinished(() => h.ctx.dispose())
      const session = h.sessions.create()
      converse(session, 3)
      const before = await contextOf(h, session)
      await expect(h.compaction.compact(session, { reason: 'manual' })).rejects.toMatchObject({ code: 'COMPACTION_SUMMARIZER_FAILED' })
      expect(compactionTypes(session)).toEqual(['compaction/start', 'compaction/end'])
      expect(typeof (session.events.at(-1)!.data as { error?: unknown }).error).toBe('string')
      const after = await contextOf(h, session)
      expect(after.messages).toEqual(before.messages)
      expect(after.compacting).toBe(false)
      // Every event reached the backend: nothing the session holds is refused.
      await h.sessions.flush(session)
      expect((await h.persistence.inspect(session.header.id)).events).toHaveLength(session.events.length)
      await h.compaction.compact(session, { reason: 'manual' })
      expect(compactionTypes(session).slice(-3)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    })
  }

  it("stores at most MAX_STORED_ERROR_CHARS of a failure's text", async () => {
    const h = await host(createMemoryPersistence(), scripted([async () => Promise.reject(new Error('e'.repeat(1_000_000)))]))
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    await expect(h.compaction.compact(session, { reason: 'manual' })).rejects.toMatchObject({ code: 'COMPACTION_SUMMARIZER_FAILED' })
    const stored = (session.events.at(-1)!.data as { error: string }).error
    expect(stored.length).toBeLessThanOrEqual(MAX_STORED_ERROR_CHARS + 1)
    expect(stored.startsWith('eee')).toBe(true)
  })
})

describe('persistence that fails mid-compaction', () => {
  it('ends the compaction and throws the flush failure; once persistence is back the session compacts', async () => {
    const { persistence, fail } = failingAppends(createMemoryPersistence())
    const h = await host(persistence)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    converse(session, 3)
    await h.sessions.flush(session)
    fail(1)
    const error = await h.compaction.compact(session, { reason: 'manual' }).catch((e: unknown) => e)
    expect(isDshError(error, 'SESSION_FLUSH_FAILED')).toBe(true)
    expect(compactionTypes(session)).toEqual(['compaction/start', 'compaction/end'])
    expect((await contextOf(h, session)).compacting).toBe(false)
    const result = await h.compaction.compact(session, { reason: 'manual' })
    expect((await contextOf(h, session)).messages[0]!.summary?.compactionId).toBe(result.compactionId)
    await h.sessions.flush(session)
    const stored: SessionRangeObservation = await h.persistence.inspectRange(session.header.id, {})
    expect(stored.events.map((e) => e.type)).toEqual(session.events.map((e) => e.type))
  })
})

describe('shadowedRange', () => {
  it('takes a context of 200,000 messages (no argument spread of the whole range)', () => {
    const messages = Array.from({ length: 200_000 }, (_, seq) => ({ role: 'user' as const, blocks: [], seq: seq + 3 }))
    const range = shadowedRange(messages, 4, 200_003) as ShadowedRange
    expect(range).toMatchObject({ from: 3, to: 199_999 })
    expect(range.messages).toHaveLength(199_996)
  })
})
