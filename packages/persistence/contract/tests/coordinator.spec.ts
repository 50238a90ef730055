import { parseSessionHeader, type Session, SessionId, SessionLogOffset } from '@dsh/session'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createMemoryPersistence, type PersistenceCoordinatorOptions, SessionPersistenceCoordinator } from '../src/index.js'
import { deferred, sleep, testHost, until } from './support.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  vi.useRealTimers()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function setup(options: PersistenceCoordinatorOptions = {}) {
  const host = testHost()
  const coordinator = new SessionPersistenceCoordinator(host.ctx, host.backend, { retryDelayMs: 2, maxRetryDelayMs: 10, ...options })
  coordinator.start()
  cleanups.push(async () => {
    await coordinator.close().catch(() => {})
    await host.ctx.dispose()
  })
  return { ...host, coordinator }
}

/**
 * Fakes the coordinator's write-behind and retry timers only: the in-memory
 * backend yields with `setImmediate`, which keeps running for real.
 */
function fakeTimers(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
}

function chat(session: Session, turn: number, chunks: number): void {
  session.append('turn/start', { turn })
  session.append('user/message', { text: `question ${turn}` })
  for (let i = 0; i < chunks; i++) session.append('assistant/chunk', { turn, index: i, delta: `t${turn}c${i} ` })
  session.append('turn/end', { turn, reason: 'completed' })
}

async function stored(
  host: { backend: { inner: { inspect(id: SessionId): Promise<{ events: readonly { seq: number; type: string; data: unknown }[] }> } } },
  id: string,
) {
  return (await host.backend.inner.inspect(SessionId(id))).events
}

describe('write-behind batching', () => {
  it('writes the events of one window as one batch, header included', async () => {
    const host = setup({ writeBehindMs: 5 })
    const session = host.sessions.create()
    chat(session, 1, 20)
    await until(() => host.coordinator.status(session.id)?.pending === 0 && host.coordinator.status(session.id)?.materialized === true)
    expect(host.backend.attempts).toEqual([{ id: session.id, seqs: Array.from({ length: 23 }, (_, i) => i), ok: true }])
    expect((await stored(host, session.id)).map((e) => e.seq)).toEqual(Array.from({ length: 23 }, (_, i) => i))
  })

  it('holds events for the configured window; a flush writes them at once', async () => {
    fakeTimers()
    const host = setup({ writeBehindMs: 60_000 })
    const session = host.sessions.create()
    chat(session, 1, 3)
    await vi.advanceTimersByTimeAsync(59_999)
    expect(host.backend.attempts).toEqual([])
    expect(await host.backend.inner.stat(session.id)).toBeUndefined()
    await host.sessions.flush(session)
    expect(host.backend.attempts).toHaveLength(1)
    expect(await stored(host, session.id)).toHaveLength(6)
    // The flush took the window's place: no write is left scheduled.
    expect(vi.getTimerCount()).toBe(0)
  })

  it('writes held events as one batch when the window ends, without a flush', async () => {
    fakeTimers()
    const host = setup({ writeBehindMs: 60_000 })
    const session = host.sessions.create()
    chat(session, 1, 3)
    await vi.advanceTimersByTimeAsync(59_999)
    expect(host.backend.attempts).toEqual([])
    const attempted = host.backend.attempted(1)
    await vi.advanceTimersByTimeAsync(1)
    await attempted
    expect(host.backend.attempts.map((a) => a.seqs)).toEqual([[0, 1, 2, 3, 4, 5]])
  })

  it('materializes a session created without events', async () => {
    const host = setup()
    const session = host.sessions.create({ cwd: '/work' })
    await until(() => host.coordinator.status(session.id)?.materialized === true)
    const [record] = await host.backend.inner.list()
    expect(record).toMatchObject({ header: session.header, inheritedEventCount: 0 })
  })

  it('splits large backlogs into batches of maxBatchEvents, in order', async () => {
    const host = setup({ writeBehindMs: 60_000, maxBatchEvents: 10 })
    const session = host.sessions.create()
    for (let i = 0; i < 25; i++) session.append('user/message', { text: `m${i}` })
    await host.sessions.flush(session)
    expect(host.backend.batches.map((b) => b.seqs.length)).toEqual([10, 10, 5])
    expect(host.backend.batches.flatMap((b) => b.seqs)).toEqual(Array.from({ length: 25 }, (_, i) => i))
  })

  it('events appended while a batch is in flight form the next batch', async () => {
    const host = setup({ writeBehindMs: 1 })
    const gate = deferred()
    host.backend.appendGate = gate.promise
    const session = host.sessions.create()
    session.append('user/message', { text: 'first' })
    await until(() => host.backend.attempts.length === 1)
    for (let i = 0; i < 5; i++) session.append('user/message', { text: `during ${i}` })
    host.backend.appendGate = undefined
    gate.resolve()
    await host.sessions.flush(session)
    expect(host.backend.attempts.map((a) => a.seqs)).toEqual([[0], [1, 2, 3, 4, 5]])
  })
})

describe('the flush barrier', () => {
  it('store.flush resolves only once everything appended so far is durable', async () => {
    const host = setup({ writeBehindMs: 60_000 })
    const gate = deferred()
    host.backend.appendGate = gate.promise
    const session = host.sessions.create()
    chat(session, 1, 4)
    let flushed = false
    const flushing = host.sessions.flush(session).then(() => {
      flushed = true
    })
    // The batch's append has started and waits at the gate. The backend's
    // stat yields a full event-loop turn, so a flush that did not wait for
    // the append would have settled by the time it answers.
    await host.backend.attempted(1)
    expect(await host.backend.inner.stat(session.id)).toBeUndefined()
    expect(flushed).toBe(false)
    gate.resolve()
    await flushing
    expect(await stored(host, session.id)).toHaveLength(7)
  })

  it('a flush during an in-flight batch also covers events appended after that batch started', async () => {
    const host = setup({ writeBehindMs: 1 })
    const gate = deferred()
    host.backend.appendGate = gate.promise
    const session = host.sessions.create()
    session.append('user/message', { text: 'a' })
    await until(() => host.backend.attempts.length === 1)
    session.append('user/message', { text: 'b' })
    session.append('user/message', { text: 'c' })
    const flushing = host.sessions.flush(session)
    host.backend.appendGate = undefined
    gate.resolve()
    await flushing
    expect((await stored(host, session.id)).map((e) => e.seq)).toEqual([0, 1, 2])
  })

  it('resolves at its own target while the session keeps appending', async () => {
    const host = setup({ writeBehindMs: 0 })
    const session = host.sessions.create()
    session.append('user/message', { text: 'start' })
    let stop = false
    let appended = 0
    const pump = (async () => {
      while (!stop) {
        session.append('assistant/chunk', { turn: 1, index: appended++, delta: 'x' })
        await sleep(1)
      }
    })()
    await sleep(10)
    const target = session.seq
    await host.sessions.flush(session)
    const durable = host.coordinator.status(session.id)!.durableSeq!
    expect(durable).toBeGreaterThanOrEqual(target)
    expect(stop).toBe(false)
    stop = true
    await pump
    await host.sessions.flush(session)
    expect((await stored(host, session.id)).length).toBe(session.seq)
  })

  it('dispose flushes, then the coordinator forgets the session', async () => {
    const host = setup({ writeBehindMs: 60_000 })
    const session = host.sessions.create()
    chat(session, 1, 2)
    await host.sessions.dispose(session.id)
    expect(await stored(host, session.id)).toHaveLength(5)
    expect(host.coordinator.status(session.id)).toBeUndefined()
  })
})

describe('failed batches', () => {
  it('are kept in order and retried until they land: nothing lost, reordered or duplicated', async () => {
    const host = setup({ writeBehindMs: 1 })
    host.backend.failAppends(4)
    const session = host.sessions.create()
    chat(session, 1, 3)
    await until(() => host.backend.attempts.length >= 2)
    chat(session, 2, 3)
    await until(() => host.coordinator.status(session.id)?.pending === 0)
    const events = await stored(host, session.id)
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect(events.map((e) => e.type)).toEqual(session.events.map((e) => e.type))
    expect(events.map((e) => JSON.stringify(e.data))).toEqual(session.events.map((e) => JSON.stringify(e.data)))
    // Every attempt started at the durable watermark, and the successful ones tile the log exactly once.
    let durable = 0
    for (const attempt of host.backend.attempts) {
      expect(attempt.seqs[0]).toBe(durable)
      if (attempt.ok) durable += attempt.seqs.length
    }
    expect(durable).toBe(12)
    expect(host.backend.attempts.filter((a) => !a.ok)).toHaveLength(4)
    expect(host.logger.warnings.some((w) => w.includes('retrying'))).toBe(true)
    expect(host.coordinator.status(session.id)).toMatchObject({ failures: 0, stalled: false })
  })

  it('store.flush rejects with SESSION_FLUSH_FAILED while the backend fails, and succeeds later', async () => {
    const host = setup({ writeBehindMs: 60_000, retryDelayMs: 60_000, maxRetryDelayMs: 60_000 })
    const session = host.sessions.create()
    chat(session, 1, 2)
    host.backend.failAppends(1)
    await expect(host.sessions.flush(session)).rejects.toMatchObject({
      code: 'SESSION_FLUSH_FAILED',
      cause: { code: 'SESSION_PERSISTENCE_IO' },
    })
    expect(host.coordinator.status(session.id)).toMatchObject({ pending: 5, failures: 1, materialized: false })
    session.append('user/message', { text: 'after the failure' })
    await host.sessions.flush(session)
    const events = await stored(host, session.id)
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
    expect(events[5]!.data).toEqual({ text: 'after the failure' })
  })

  it('a batch that landed although its append reported failure is not written twice', async () => {
    const host = setup({ writeBehindMs: 1 })
    const session = host.sessions.create()
    chat(session, 1, 2)
    host.backend.loseAcks(1)
    await until(() => host.backend.attempts.length >= 1)
    chat(session, 2, 2)
    await until(() => host.coordinator.status(session.id)?.pending === 0 && host.coordinator.status(session.id)?.failures === 0)
    await host.sessions.flush(session)
    const events = await stored(host, session.id)
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i))
    expect(host.coordinator.status(session.id)!.durableSeq).toBe(10)
  })

  it('a real conflict stalls the session instead of retrying forever; an explicit flush tries again', async () => {
    fakeTimers()
    const host = setup({ writeBehindMs: 1 })
    // Another lifecycle already owns the id in storage.
    const other = parseSessionHeader({ version: 1, id: 'taken', createdAt: 1, isSeeded: false, delegationDepth: 0 })
    await host.backend.inner.append({ header: other, inheritedEventCount: SessionLogOffset(0) }, [])
    const session = host.sessions.create({ id: 'taken', createdAt: 2 })
    session.append('user/message', { text: 'mine' })
    const logged = host.logger.nextMessage()
    await vi.advanceTimersToNextTimerAsync()
    // The first failure is reported as one retrying cannot fix.
    expect(await logged).toMatchObject({ level: 'error', message: expect.stringContaining("session 'taken'") })
    expect(host.coordinator.status('taken')?.stalled).toBe(true)
    const attempts = host.backend.attempts.length
    expect(attempts).toBeGreaterThan(0)
    // No retry is scheduled, and none comes however long the clock runs (retries back off from 2 to 10 ms here).
    expect(vi.getTimerCount()).toBe(0)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(host.backend.attempts.length).toBe(attempts)
    await expect(host.sessions.flush(session)).rejects.toMatchObject({
      code: 'SESSION_FLUSH_FAILED',
      cause: { code: 'SESSION_PERSISTENCE_CONFLICT' },
    })
    // The stored lifecycle is untouched.
    expect((await host.backend.inner.inspect(SessionId('taken'))).header.createdAt).toBe(1)
  })
})

describe('restored and seeded sessions', () => {
  it('never re-appends the events of a restored session; new events continue from its seq', async () => {
    const host = setup({ writeBehindMs: 1 })
    const original = host.sessions.create({ id: 'resumable' })
    chat(original, 1, 3)
    await host.sessions.dispose(original.id)
    const batchesBefore = host.backend.batches.length

    const loaded = await host.backend.load(SessionId('resumable'))
    const restored = host.sessions.restore(loaded)
    await host.sessions.flush(restored)
    expect(host.backend.batches.length).toBe(batchesBefore)
    expect(host.coordinator.status('resumable')).toMatchObject({ durableSeq: 6, materialized: true, pending: 0 })

    restored.append('user/message', { text: 'resumed' })
    await host.sessions.flush(restored)
    expect(host.backend.batches.at(-1)).toEqual({ id: 'resumable', seqs: [6] })
    expect((await stored(host, 'resumable')).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
  })

  it('a restored session after crash repair continues after the interrupted turn/end', async () => {
    const host = setup({ writeBehindMs: 60_000 })
    const crashed = host.sessions.create({ id: 'crashed' })
    crashed.append('turn/start', { turn: 1 })
    crashed.append('assistant/chunk', { turn: 1, index: 0, delta: 'par' })
    await host.sessions.dispose(crashed.id)
    const loaded = await host.backend.load(SessionId('crashed'))
    expect(loaded.repaired).toBe(true)
    const restored = host.sessions.restore(loaded)
    restored.append('turn/start', { turn: 2 })
    await host.sessions.flush(restored)
    expect((await stored(host, 'crashed')).map((e) => e.type)).toEqual(['turn/start', 'assistant/chunk', 'turn/end', 'turn/start'])
  })

  it('a seeded fork persists its seed with the first batch, cut included', async () => {
    const host = setup({ writeBehindMs: 60_000, maxBatchEvents: 2 })
    const parent = host.sessions.create({ id: 'parent' })
    chat(parent, 1, 2)
    const child = host.sessions.fork(parent, { childId: 'child', origin: 'subagent', delegationDepth: 1 })
    child.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'scripted' })
    await host.sessions.flush(child)
    const first = host.backend.batches.find((b) => b.id === 'child')!
    expect(first.seqs).toEqual([0, 1, 2, 3, 4])
    const observation = await host.backend.inner.inspect(SessionId('child'))
    expect(observation.inheritedEventCount).toBe(5)
    expect(observation.header).toEqual(child.header)
    expect(observation.events.map((e) => e.type)).toEqual(child.events.map((e) => e.type))
  })
})

describe('adoption', () => {
  it('persists sessions that were live before the coordinator started, without duplicating stored events', async () => {
    const host = testHost()
    const fresh = host.sessions.create({ id: 'fresh' })
    fresh.append('user/message', { text: 'before start' })
    const partly = host.sessions.create({ id: 'partly' })
    partly.append('user/message', { text: 'one' })
    await host.backend.inner.append({ header: partly.header, inheritedEventCount: partly.inheritedEventCount }, [partly.eventAt(0)!])
    partly.append('user/message', { text: 'two' })

    const coordinator = new SessionPersistenceCoordinator(host.ctx, host.backend, { writeBehindMs: 1 })
    coordinator.start()
    cleanups.push(async () => {
      await coordinator.close()
      await host.ctx.dispose()
    })
    await host.sessions.flush(fresh)
    await host.sessions.flush(partly)
    expect((await stored(host, 'fresh')).map((e) => e.seq)).toEqual([0])
    expect((await stored(host, 'partly')).map((e) => e.seq)).toEqual([0, 1])
    // Adoption read the stored offset: only the event it lacked was appended.
    expect(host.backend.batches.filter((b) => b.id === 'partly').map((b) => b.seqs)).toEqual([[1]])
  })
})

describe('close', () => {
  it('flushes what is pending, stops listening and leaves the backend open', async () => {
    fakeTimers()
    const host = setup({ writeBehindMs: 1 })
    const session = host.sessions.create()
    chat(session, 1, 1)
    await host.coordinator.close()
    expect(await stored(host, session.id)).toHaveLength(4)
    const attempts = host.backend.attempts.length
    session.append('user/message', { text: 'after close' })
    // A listening coordinator would have scheduled a write 1 ms out; a closed one schedules none.
    expect(vi.getTimerCount()).toBe(0)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(host.backend.attempts.length).toBe(attempts)
    expect(await stored(host, session.id)).toHaveLength(4)
  })

  it('retries what the store failed to take while closeWaitMs lasts, so a store back in time loses nothing', async () => {
    const host = setup({ writeBehindMs: 60_000, retryDelayMs: 1, maxRetryDelayMs: 1, closeWaitMs: 600_000 })
    const session = host.sessions.create()
    chat(session, 1, 2)
    host.backend.failAppends(5)
    await host.coordinator.close()
    expect(host.coordinator.unstored()).toEqual([])
    expect((await stored(host, session.id)).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
    expect(host.backend.attempts.filter((a) => !a.ok)).toHaveLength(5)
    expect(host.logger.warnings.filter((w) => w.includes('are not stored yet'))).toEqual([
      'dsh: 5 event(s) are not stored yet; retrying for up to 600000 ms before giving up on them.',
    ])
  })

  it('rejects when the store still fails once closeWaitMs is over, and unstored names what was not stored', async () => {
    const host = setup({ writeBehindMs: 60_000, closeWaitMs: 0 })
    const kept = host.sessions.create({ id: 'kept' })
    chat(kept, 1, 1)
    await host.sessions.flush(kept)
    const lost = host.sessions.create({ id: 'lost' })
    chat(lost, 1, 2)
    kept.append('user/message', { text: 'late' })
    host.backend.failAppends(2)
    await expect(host.coordinator.close()).rejects.toThrow()
    const unstored = host.coordinator.unstored().sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(unstored.map(({ id, pending }) => ({ id, pending }))).toEqual([
      { id: 'kept', pending: 1 },
      { id: 'lost', pending: 5 },
    ])
    expect(unstored.every((u) => (u.lastError as { code?: string }).code === 'SESSION_PERSISTENCE_IO')).toBe(true)
  })

  it('does not wait for a failure a retry cannot fix', async () => {
    const host = setup({ writeBehindMs: 60_000, closeWaitMs: 600_000 })
    const session = host.sessions.create()
    chat(session, 1, 1)
    host.backend.failAppends(1, 'SESSION_PERSISTENCE_EVENT_TOO_LARGE')
    await expect(host.coordinator.close()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_EVENT_TOO_LARGE' })
    expect(host.backend.attempts).toHaveLength(1)
    expect(host.coordinator.unstored()).toMatchObject([{ id: session.id, pending: 4 }])
  })

  it('rejects a non-finite option with INVALID_OPTION', () => {
    const host = testHost()
    expect(() => new SessionPersistenceCoordinator(host.ctx, createMemoryPersistence(), { writeBehindMs: Number.NaN })).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_OPTION' }),
    )
  })
})
