import { raceAbort, throwIfAborted } from '@dsh/context'
import type { SessionId, SessionLogOffset } from '@dsh/session'
import { persistenceCancelled, SessionPersistenceError } from './errors.js'
import type { AppendedEvent } from './event-runs.js'
import type { SessionRepairs } from './repair.js'
import type {
  AppendResult,
  AppendTarget,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  PersistenceMetrics,
  SessionChangeCursor,
  SessionChanges,
  SessionObservation,
  SessionPersistence,
  SessionRange,
  SessionRangeObservation,
  SessionRevision,
  SessionSuffixObservation,
} from './types.js'

export interface SharedReadsOptions {
  /** How many sessions' latest observations to keep (0 turns the LRU off). Default 8. */
  readonly lruSize?: number
}

/** What the sharing layer saved; physical reads stay in the backend's `metrics`. */
export interface SharedReadsStats {
  /** `inspect` calls that joined a read already in flight for the same id. */
  joined: number
  /** `inspect` calls answered from the LRU after `stat` confirmed the revision. */
  lruHits: number
  /** `inspect` calls that started a physical read. */
  misses: number
}

/** A backend with shared in-flight reads and a small observation LRU in front of it. */
export interface SharedReadsPersistence extends SessionPersistence {
  readonly sharedReads: Readonly<SharedReadsStats>
  /** The wrapped backend. */
  readonly backend: SessionPersistence
}

interface Cached {
  readonly revision: SessionRevision
  readonly observation: SessionObservation
}

/**
 * Wraps a backend so that concurrent `inspect(id)` calls share one physical
 * read and recent observations are reused while their revision is current.
 *
 * Freshness: an LRU entry is served only after `stat(id)` returns its exact
 * revision (revisions never repeat, not even across a delete and re-create),
 * so writes by other instances or processes are seen. An in-flight read is
 * joined only by callers arriving before a write through this wrapper to the
 * same id settled, so a read issued after an append resolved always sees it.
 */
export function withSharedReads(backend: SessionPersistence, options: SharedReadsOptions = {}): SharedReadsPersistence {
  const lruSize = options.lruSize ?? 8
  if (!Number.isSafeInteger(lruSize) || lruSize < 0) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_OPTION',
      `lruSize must be a non-negative integer, got ${String(lruSize)}.`,
    )
  }
  return new SharedReads(backend, lruSize)
}

class SharedReads implements SharedReadsPersistence {
  readonly backend: SessionPersistence
  readonly #lruSize: number
  /** Map order is recency order: the first entry is evicted first. */
  readonly #lru = new Map<string, Cached>()
  /** Reads that later callers may join; a settled write removes its id. */
  readonly #inflight = new Map<string, Promise<SessionObservation>>()
  readonly #stats: SharedReadsStats = { joined: 0, lruHits: 0, misses: 0 }
  /** Attachments pass straight through (they change no revision); present only when the backend has them. */
  readonly putAttachment?: NonNullable<SessionPersistence['putAttachment']>
  readonly readAttachment?: NonNullable<SessionPersistence['readAttachment']>
  /** The writer lock probe passes straight through too (it reads no log); present only when the backend has it. */
  readonly writerOf?: NonNullable<SessionPersistence['writerOf']>

  constructor(backend: SessionPersistence, lruSize: number) {
    this.backend = backend
    this.#lruSize = lruSize
    if (backend.putAttachment !== undefined) this.putAttachment = backend.putAttachment.bind(backend)
    if (backend.readAttachment !== undefined) this.readAttachment = backend.readAttachment.bind(backend)
    if (backend.writerOf !== undefined) this.writerOf = backend.writerOf.bind(backend)
  }

  get metrics(): Readonly<PersistenceMetrics> {
    return this.backend.metrics
  }

  get repairs(): SessionRepairs | undefined {
    return this.backend.repairs
  }

  get sharedReads(): Readonly<SharedReadsStats> {
    return this.#stats
  }

  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    try {
      throwIfAborted(signal, persistenceCancelled)
    } catch (error) {
      return Promise.reject(error)
    }
    let shared = this.#inflight.get(id)
    if (shared !== undefined) {
      this.#stats.joined++
    } else {
      const promise = this.#prepare(id)
      shared = promise
      this.#inflight.set(id, promise)
      const done = (): void => {
        if (this.#inflight.get(id) === promise) this.#inflight.delete(id)
      }
      promise.then(done, done)
    }
    // A caller's abort stops only its own wait: the read is shared with others.
    return raceAbort(shared, signal, persistenceCancelled)
  }

  async append(target: AppendTarget, events: readonly AppendedEvent[]): Promise<AppendResult> {
    try {
      return await this.backend.append(target, events)
    } finally {
      this.#wrote(target.header.id)
    }
  }

  async load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    try {
      const loaded = await this.backend.load(id, signal)
      // The loaded log is a complete observation of its revision: keep it.
      const { repaired: _repaired, ...observation } = loaded
      this.#remember(id, Object.freeze(observation))
      return loaded
    } finally {
      this.#inflight.delete(id)
    }
  }

  async delete(id: SessionId, options?: DeleteOptions): Promise<boolean> {
    try {
      return await this.backend.delete(id, options)
    } finally {
      this.#wrote(id)
    }
  }

  list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    return this.backend.list(signal)
  }

  stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    return this.backend.stat(id, signal)
  }

  inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    return this.backend.inspectFrom(id, from, signal)
  }

  /** Not shared: a range is small, and its bounds differ from caller to caller. */
  inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    return this.backend.inspectRange(id, range, signal)
  }

  changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    return this.backend.changes(since, signal)
  }

  async close(): Promise<void> {
    this.#lru.clear()
    this.#inflight.clear()
    await this.backend.close()
  }

  async #prepare(id: SessionId): Promise<SessionObservation> {
    const cached = this.#lru.get(id)
    if (cached !== undefined) {
      // stat reads no body; a matching revision proves the entry is current.
      const revision = await this.backend.stat(id)
      if (revision === cached.revision && this.#lru.get(id) === cached) {
        this.#lru.delete(id)
        this.#lru.set(id, cached)
        this.#stats.lruHits++
        return cached.observation
      }
      if (this.#lru.get(id) === cached) this.#lru.delete(id)
    }
    this.#stats.misses++
    const read = await this.backend.inspect(id)
    const observation = Object.isFrozen(read) ? read : Object.freeze({ ...read })
    this.#remember(id, observation)
    return observation
  }

  #remember(id: string, observation: SessionObservation): void {
    if (this.#lruSize === 0) return
    this.#lru.delete(id)
    this.#lru.set(id, { revision: observation.revision, observation })
    while (this.#lru.size > this.#lruSize) this.#lru.delete(this.#lru.keys().next().value!)
  }

  /** A write settled: later readers must not join reads that started before it. */
  #wrote(id: string): void {
    this.#inflight.delete(id)
    this.#lru.delete(id)
  }
}
