import { Context, type Logger } from '@dsh/context'
import { type SessionId, type SessionLogOffset, SessionStore, type StoredSessionEvent } from '@dsh/session'
import {
  type AppendResult,
  type AppendTarget,
  createMemoryPersistence,
  type LoadedSession,
  MemoryPersistenceStorage,
  type PersistedSessionRecord,
  type SessionChangeCursor,
  type SessionChanges,
  type SessionObservation,
  type SessionPersistence,
  SessionPersistenceError,
  type SessionPersistenceErrorCode,
  type SessionRange,
  type SessionRangeObservation,
  type SessionRevision,
  type SessionSuffixObservation,
} from '../src/index.js'

/** A deferred: a promise plus the functions that settle it. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/**
 * A decorator at the storage edge that injects faults into a real backend:
 * failing appends (nothing written), lost acknowledgements (written, then
 * reported as failed), and gates that hold appends or inspections open.
 */
export class FaultyPersistence implements SessionPersistence {
  readonly inner: SessionPersistence
  /** Every append attempt: session id, the seqs it carried, and whether it reported success. */
  readonly attempts: Array<{ id: string; seqs: number[]; ok?: boolean }> = []
  #failures: SessionPersistenceErrorCode[] = []
  #lostAcks = 0
  /** While set, appends wait for it before writing. */
  appendGate: Promise<void> | undefined
  /** While set, inspections read, then wait for it before answering. */
  inspectGate: Promise<void> | undefined
  #attemptWaiters: Array<{ count: number; resolve: () => void }> = []

  constructor(inner: SessionPersistence) {
    this.inner = inner
  }

  get metrics() {
    return this.inner.metrics
  }

  /** The next `count` appends fail with `code` before writing anything. */
  failAppends(count: number, code: SessionPersistenceErrorCode = 'SESSION_PERSISTENCE_IO'): void {
    for (let i = 0; i < count; i++) this.#failures.push(code)
  }

  /** The next `count` appends are written, then reported as failed. */
  loseAcks(count: number): void {
    this.#lostAcks += count
  }

  /** Resolves once `count` appends were attempted in all (at once when they were). */
  attempted(count: number): Promise<void> {
    if (this.attempts.length >= count) return Promise.resolve()
    return new Promise((resolve) => this.#attemptWaiters.push({ count, resolve }))
  }

  /** Ids and seqs of the attempts that carried events, in order. */
  get batches(): Array<{ id: string; seqs: number[] }> {
    return this.attempts.filter((a) => a.seqs.length > 0).map(({ id, seqs }) => ({ id, seqs }))
  }

  async append(target: AppendTarget, events: readonly StoredSessionEvent[]): Promise<AppendResult> {
    const attempt: { id: string; seqs: number[]; ok?: boolean } = { id: target.header.id, seqs: events.map((e) => e.seq) }
    this.attempts.push(attempt)
    attempt.ok = false
    this.#attemptWaiters = this.#attemptWaiters.filter((waiter) => {
      if (this.attempts.length < waiter.count) return true
      waiter.resolve()
      return false
    })
    if (this.appendGate) await this.appendGate
    const code = this.#failures.shift()
    if (code !== undefined) throw new SessionPersistenceError(code, `injected ${code}`)
    const result = await this.inner.append(target, events)
    if (this.#lostAcks > 0) {
      this.#lostAcks--
      throw new SessionPersistenceError('SESSION_PERSISTENCE_IO', 'injected: the append landed but its acknowledgement was lost')
    }
    attempt.ok = true
    return result
  }

  list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    return this.inner.list(signal)
  }

  inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    return this.inner.inspectFrom(id, from, signal)
  }

  inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    return this.inner.inspectRange(id, range, signal)
  }

  changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    return this.inner.changes(since, signal)
  }

  /** Reads at once, then holds the result until `inspectGate` opens (a slow read of a snapshot). */
  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    const gate = this.inspectGate
    const result = await this.inner.inspect(id, signal)
    if (gate) await gate
    return result
  }

  load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    return this.inner.load(id, signal)
  }

  stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    return this.inner.stat(id, signal)
  }

  delete(id: SessionId): Promise<boolean> {
    return this.inner.delete(id)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

export interface CapturingLogger extends Logger {
  readonly warnings: string[]
  readonly errors: string[]
  /** Resolves with the next warning or error logged after the call. */
  nextMessage(): Promise<{ level: 'warn' | 'error'; message: string }>
}

export function capturingLogger(): CapturingLogger {
  const warnings: string[] = []
  const errors: string[] = []
  const waiters: Array<(logged: { level: 'warn' | 'error'; message: string }) => void> = []
  const notify = (level: 'warn' | 'error', message: string) => {
    for (const resolve of waiters.splice(0)) resolve({ level, message })
  }
  return {
    warnings,
    errors,
    warn: (message) => {
      warnings.push(message)
      notify('warn', message)
    },
    error: (message) => {
      errors.push(message)
      notify('error', message)
    },
    nextMessage: () => new Promise((resolve) => waiters.push(resolve)),
  }
}

/** A context with a session store and a fresh in-memory backend behind a fault injector. */
export function testHost(): {
  ctx: Context
  sessions: SessionStore
  storage: MemoryPersistenceStorage
  backend: FaultyPersistence
  logger: CapturingLogger
} {
  const logger = capturingLogger()
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => 1_700_000_000_000 + n * 10, newId: () => `s${++n}` })
  ctx.provide('sessions', sessions)
  const storage = new MemoryPersistenceStorage()
  const backend = new FaultyPersistence(createMemoryPersistence({ storage }))
  return { ctx, sessions, storage, backend, logger }
}

/** Waits `ms` real milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls `condition` until it holds; `timeoutMs` only guards a hang (a busy machine may take seconds). */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await sleep(2)
  }
}

/**
 * The contract harness's storage faults over an in-memory storage: a batch
 * left past the recorded end (an append that never committed), and a batch
 * whose stored text no longer parses.
 */
export function memoryFaults(storage: MemoryPersistenceStorage): {
  tearTail(id: string): Promise<void>
  damageBatch(id: string, seq: number): Promise<void>
} {
  const logOf = (id: string) => {
    const log = storage.logs.get(id)
    if (log === undefined) throw new Error(`no stored log ${id}`)
    return log
  }
  return {
    async tearTail(id) {
      const log = logOf(id)
      log.batches.push({ firstSeq: log.nextSeq, count: 1, text: '[{"type":"assistant/chunk","seq":' })
    },
    async damageBatch(id, seq) {
      const batch = logOf(id).batches.find((b) => b.firstSeq <= seq && seq < b.firstSeq + b.count)
      if (batch === undefined) throw new Error(`no stored batch of ${id} holds ${seq}`)
      batch.text = batch.text.slice(1)
    },
  }
}
