import {
  type AttachmentRef,
  parseSessionHeader,
  type SessionHeader,
  type SessionId,
  SessionLogOffset,
  type StoredSessionEvent,
} from '@dsh/session'
import { attachmentNotFound, checkAttachment, checkAttachmentCap, checkAttachmentSession, checkDigest } from './attachments.js'
import { persistenceCancelled, SessionPersistenceError } from './errors.js'
import { type AppendedEvent, expandEventRuns } from './event-runs.js'
import { checkRange, rangeBounds } from './range.js'
import { SessionRepairs } from './repair.js'
import type {
  AppendResult,
  AppendTarget,
  AttachmentPutOptions,
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
import { checkAppend, eventLine } from './validate.js'

interface StoredLog {
  /** The serialized physical header: logical header plus the exact cut. */
  readonly headerLine: string
  /** What a writer keeps of its header, so appends do not count as header reads. */
  readonly writer: { readonly header: SessionHeader; readonly inheritedEventCount: SessionLogOffset }
  /**
   * One serialized JSON array per batch, as a file backend keeps frames.
   * Only the batches below `nextSeq` are committed; one past it (what a
   * crash in the middle of an append leaves in a file) is never read.
   */
  readonly batches: StoredBatch[]
  nextSeq: number
  /** Unique per materialization, so a re-created id never repeats a revision. */
  readonly lifecycle: number
}

/** One stored batch: its events `[firstSeq, firstSeq + count)` as one JSON array. */
interface StoredBatch {
  readonly firstSeq: number
  readonly count: number
  text: string
}

/**
 * The "disk" of in-memory backends. Several `createMemoryPersistence` instances
 * over one storage behave like processes sharing a root: what one commits the
 * others read, and a reopened instance finds everything committed before.
 */
export class MemoryPersistenceStorage {
  readonly logs = new Map<string, StoredLog>()
  nextLifecycle = 1
  /** Identifies this storage's change feed: a cursor minted over another storage is foreign. */
  // node:crypto when the first memory backend is made, not when this module is imported.
  readonly feedId = process.getBuiltinModule('node:crypto').randomUUID()
  /** The change feed: one entry per durable change (create, batch, repair, delete), in commit order. */
  readonly changed: string[] = []
  /** Attachment bytes by SHA-256, each stored once however many sessions read it. */
  readonly blobs = new Map<string, Buffer>()
  /**
   * Per session, the digests it may read and the session that holds each:
   * itself (it stored them) or the source it forks (inherited by reference
   * on the fork's first append, never copied).
   */
  readonly attachments = new Map<string, Map<string, string>>()
}

const CURSOR_PREFIX = 'mem1:'

export interface MemoryPersistenceOptions {
  /** Share storage between instances (reopen). Default: a private, new storage. */
  readonly storage?: MemoryPersistenceStorage
  /** Clock for the `time` of crash-repair events. */
  readonly clock?: () => number
  /** The cap on one attachment's bytes (default `ATTACHMENT_MAX_BYTES`, 20 MiB). */
  readonly attachmentMaxBytes?: number
}

/**
 * An in-memory backend that passes the contract suite: for tests elsewhere and
 * deployments without disk. Logs are kept serialized (header line + one JSON
 * string per batch), so reads return fresh, deep-frozen, lossless copies and
 * the metrics count real bytes, like a file backend.
 */
export function createMemoryPersistence(options: MemoryPersistenceOptions = {}): SessionPersistence {
  const cap = checkAttachmentCap(options.attachmentMaxBytes)
  return new MemoryPersistence(options.storage ?? new MemoryPersistenceStorage(), options.clock ?? Date.now, cap)
}

class MemoryPersistence implements SessionPersistence {
  readonly #storage: MemoryPersistenceStorage
  readonly #clock: () => number
  readonly #metrics: PersistenceMetrics = { headerReads: 0, bodyReads: 0, bytesRead: 0, appends: 0, rescans: 0, logOpens: 0 }
  readonly repairs = new SessionRepairs()
  readonly #attachmentMaxBytes: number
  #closed = false

  constructor(storage: MemoryPersistenceStorage, clock: () => number, attachmentMaxBytes: number) {
    this.#storage = storage
    this.#clock = clock
    this.#attachmentMaxBytes = attachmentMaxBytes
  }

  get metrics(): Readonly<PersistenceMetrics> {
    return this.#metrics
  }

  async append(target: AppendTarget, items: readonly AppendedEvent[]): Promise<AppendResult> {
    await this.#io()
    // Everything from the check to the commit runs without an await, so
    // concurrent appends see each other's effects (one wins, the other conflicts).
    const id = target.header.id
    const existing = this.#storage.logs.get(id)
    checkAppend(target, items, existing === undefined ? undefined : { ...existing.writer, nextSeq: existing.nextSeq })
    const events = expandEventRuns(id, items)
    const text = encodeBatchText(id, events)
    let log = existing
    if (log === undefined) {
      log = {
        headerLine: JSON.stringify({ header: target.header, inheritedEventCount: target.inheritedEventCount }),
        writer: { header: target.header, inheritedEventCount: target.inheritedEventCount },
        batches: [],
        nextSeq: 0,
        lifecycle: this.#storage.nextLifecycle++,
      }
      this.#storage.logs.set(id, log)
      if (target.forkSource !== undefined) this.#inheritAttachments(id, target.forkSource)
      if (events.length === 0) this.#storage.changed.push(id)
    }
    if (events.length > 0) this.#commit(log, events, text)
    return { revision: revisionOf(log), nextSeq: SessionLogOffset(log.nextSeq) }
  }

  async list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    await this.#io(signal)
    const records: PersistedSessionRecord[] = []
    for (const log of this.#storage.logs.values()) {
      const { header, inheritedEventCount } = this.#readHeader(log)
      records.push(Object.freeze({ header, inheritedEventCount, revision: revisionOf(log) }))
    }
    return records
  }

  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    await this.#io(signal)
    const log = this.#find(id)
    const observation = this.#readBody(log)
    await this.#io(signal)
    return observation
  }

  async inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    SessionLogOffset(from)
    const { total: _total, ...suffix } = await this.inspectRange(id, { from }, signal)
    return Object.freeze({ ...suffix, from })
  }

  /** Reads only the batches that hold the range (found by their seqs, without parsing the others). */
  async inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    const checked = checkRange(range)
    await this.#io(signal)
    const log = this.#find(id)
    const { start, end } = rangeBounds(checked, log.nextSeq)
    const { header, inheritedEventCount } = this.#readHeader(log)
    const events = this.#readEvents(id, log, start, end)
    await this.#io(signal)
    return Object.freeze({
      header,
      inheritedEventCount,
      revision: revisionOf(log),
      from: SessionLogOffset(start),
      events: Object.freeze(events),
      total: log.nextSeq,
    })
  }

  async changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    await this.#io(signal)
    const { changed, feedId } = this.#storage
    const cursor = `${CURSOR_PREFIX}${feedId}:${changed.length}`
    const at = parseCursor(since, feedId)
    if (at === undefined || at > changed.length) {
      this.#metrics.rescans = (this.#metrics.rescans ?? 0) + 1
      return Object.freeze({ ids: Object.freeze([]), cursor, rescan: true })
    }
    const ids = [...new Set(changed.slice(at))] as SessionId[]
    return Object.freeze({ ids: Object.freeze(ids), cursor, rescan: false })
  }

  async load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    await this.#io(signal)
    const log = this.#find(id)
    const observation = this.#readBody(log)
    const repairs = this.repairs.eventsFor(observation.events, this.#clock())
    if (repairs.length === 0) return Object.freeze({ ...observation, repaired: false })
    this.#commit(log, repairs, encodeBatchText(id, repairs))
    return Object.freeze({
      ...observation,
      events: Object.freeze([...observation.events, ...repairs]),
      revision: revisionOf(log),
      repaired: true,
    })
  }

  async stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    await this.#io(signal)
    const log = this.#storage.logs.get(id)
    return log === undefined ? undefined : revisionOf(log)
  }

  async delete(id: SessionId, options?: DeleteOptions): Promise<boolean> {
    await this.#io()
    // Forks' logs are copies here; only attachments a fork inherited are read through its source.
    const borrowers = this.#attachmentBorrowers(id)
    if (borrowers.length > 0 && options?.materializeDependants !== true) {
      throw new SessionPersistenceError(
        'SESSION_PERSISTENCE_REFERENCED',
        `Session '${id}' holds attachments that ${borrowers.length} fork(s) read by reference (${borrowers.slice(0, 3).join(', ')}${borrowers.length > 3 ? ', …' : ''}); deleting it would break them. Delete them first, or call delete(id, { materializeDependants: true }) to hand the attachments to them first.`,
        { details: { id, dependants: borrowers.slice(0, 20) } },
      )
    }
    for (const borrower of borrowers) {
      const held = this.#storage.attachments.get(borrower)!
      for (const [digest, holder] of held) if (holder === id) held.set(digest, borrower)
    }
    const existed = this.#storage.logs.delete(id)
    if (existed) this.#storage.changed.push(id)
    const own = this.#storage.attachments.get(id)
    this.#storage.attachments.delete(id)
    if (own !== undefined) for (const digest of own.keys()) this.#collect(digest)
    return existed
  }

  async putAttachment(sessionId: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef> {
    await this.#io()
    checkAttachmentSession(sessionId)
    const { bytes: checked, digest, ref } = checkAttachment(sessionId, bytes, options, this.#attachmentMaxBytes)
    // A copy: the caller may reuse its buffer.
    if (!this.#storage.blobs.has(digest)) this.#storage.blobs.set(digest, Buffer.from(checked))
    this.#held(sessionId).set(digest, sessionId)
    return Object.freeze(ref)
  }

  async readAttachment(sessionId: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array> {
    await this.#io(signal)
    checkAttachmentSession(sessionId)
    checkDigest(sessionId, digest)
    const bytes = this.#storage.attachments.get(sessionId)?.has(digest) ? this.#storage.blobs.get(digest) : undefined
    if (bytes === undefined) throw attachmentNotFound(sessionId, digest)
    this.#metrics.bytesRead += bytes.length
    return Buffer.from(bytes)
  }

  async close(): Promise<void> {
    this.#closed = true
  }

  /** Yields like real I/O would, then re-checks the instance and the caller's signal. */
  async #io(signal?: AbortSignal): Promise<void> {
    this.#assertOpen()
    if (signal?.aborted) throw persistenceCancelled()
    await new Promise<void>((resolve) => setImmediate(resolve))
    this.#assertOpen()
    if (signal?.aborted) throw persistenceCancelled()
  }

  #assertOpen(): void {
    if (this.#closed)
      throw new SessionPersistenceError(
        'SESSION_PERSISTENCE_CLOSED',
        'This in-memory persistence instance is closed; open a new one over the same storage.',
      )
  }

  #find(id: SessionId): StoredLog {
    const log = this.#storage.logs.get(id)
    if (log === undefined)
      throw new SessionPersistenceError('SESSION_PERSISTENCE_NOT_FOUND', `Session '${id}' is not persisted.`, { details: { id } })
    return log
  }

  /** A fork reads every attachment its source can, held where the source's are (no bytes copied). */
  #inheritAttachments(id: string, source: string): void {
    const inherited = this.#storage.attachments.get(source)
    if (inherited === undefined || inherited.size === 0) return
    const held = this.#held(id)
    for (const [digest, holder] of inherited) if (!held.has(digest)) held.set(digest, holder)
  }

  /** The digests session `id` reads, and who holds each (made empty on first use). */
  #held(id: string): Map<string, string> {
    let held = this.#storage.attachments.get(id)
    if (held === undefined) {
      held = new Map()
      this.#storage.attachments.set(id, held)
    }
    return held
  }

  /** The other sessions that read an attachment `id` holds. */
  #attachmentBorrowers(id: string): string[] {
    const out: string[] = []
    for (const [session, held] of this.#storage.attachments) {
      if (session === id) continue
      for (const holder of held.values()) {
        if (holder === id) {
          out.push(session)
          break
        }
      }
    }
    return out
  }

  /** Drops a blob no session holds any more. */
  #collect(digest: string): void {
    for (const held of this.#storage.attachments.values()) if (held.has(digest)) return
    this.#storage.blobs.delete(digest)
  }

  #commit(log: StoredLog, events: readonly StoredSessionEvent[], text: string): void {
    // A batch left past `nextSeq` was never committed: the new one takes its place.
    const torn = log.batches.findIndex((b) => b.firstSeq >= log.nextSeq)
    if (torn !== -1) log.batches.length = torn
    log.batches.push({ firstSeq: log.nextSeq, count: events.length, text })
    log.nextSeq += events.length
    this.#metrics.appends++
    this.#storage.changed.push(log.writer.header.id)
  }

  #readHeader(log: StoredLog): { header: SessionHeader; inheritedEventCount: SessionLogOffset } {
    this.#metrics.headerReads++
    this.#metrics.logOpens = (this.#metrics.logOpens ?? 0) + 1
    this.#metrics.bytesRead += Buffer.byteLength(log.headerLine)
    const raw = JSON.parse(log.headerLine) as { header: unknown; inheritedEventCount: unknown }
    return { header: parseSessionHeader(raw.header), inheritedEventCount: SessionLogOffset(raw.inheritedEventCount) }
  }

  #readBody(log: StoredLog): SessionObservation {
    this.#metrics.bodyReads++
    const { header, inheritedEventCount } = this.#readHeader(log)
    const events = this.#readEvents(header.id, log, 0, log.nextSeq)
    return Object.freeze({ header, inheritedEventCount, events: Object.freeze(events), revision: revisionOf(log) })
  }

  /** The committed events `[start, end)`, parsing only the batches that hold them; a batch that does not parse back is `SESSION_PERSISTENCE_CORRUPT`. */
  #readEvents(id: string, log: StoredLog, start: number, end: number): StoredSessionEvent[] {
    const events: StoredSessionEvent[] = []
    for (const batch of log.batches) {
      if (batch.firstSeq + batch.count <= start || batch.firstSeq >= end) continue
      this.#metrics.bytesRead += Buffer.byteLength(batch.text)
      let parsed: StoredSessionEvent[] | undefined
      try {
        parsed = JSON.parse(batch.text) as StoredSessionEvent[]
      } catch {}
      if (!Array.isArray(parsed) || parsed.length !== batch.count || parsed.some((e, i) => e?.seq !== batch.firstSeq + i)) {
        throw new SessionPersistenceError(
          'SESSION_PERSISTENCE_CORRUPT',
          `The stored batch of events ${batch.firstSeq}-${batch.firstSeq + batch.count - 1} of session '${id}' does not read back as written.`,
          { details: { id, firstSeq: batch.firstSeq } },
        )
      }
      for (const event of parsed) if (event.seq >= start && event.seq < end) events.push(deepFreeze(event))
    }
    return events
  }
}

/** The feed position a cursor names, or `undefined` when it is absent, malformed or from another storage. */
function parseCursor(since: SessionChangeCursor | undefined, feedId: string): number | undefined {
  if (typeof since !== 'string' || !since.startsWith(`${CURSOR_PREFIX}${feedId}:`)) return undefined
  const at = Number(since.slice(CURSOR_PREFIX.length + feedId.length + 1))
  return Number.isSafeInteger(at) && at >= 0 ? at : undefined
}

function revisionOf(log: StoredLog): SessionRevision {
  return `m${log.lifecycle}.${log.nextSeq}`
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}

/** A batch as the memory backend keeps it: a JSON array of the events, each measured against the event cap first (nothing is committed past it). */
function encodeBatchText(id: SessionId, events: readonly StoredSessionEvent[]): string {
  const lines = events.map((e) => eventLine(e, id))
  return `[${lines.join(',')}]`
}
