import { type JsonValue, type SessionHeader, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { HEADER_CREATED_AT, type HeaderFields, headerOf } from '@dsh/test-kit'
import { expect } from 'vitest'
import type { AppendTarget, PersistenceMetrics, SessionPersistence } from '../types.js'

/**
 * One backend instance over one storage root, as the contract suite drives it.
 * A file backend's `root` is a directory; an in-memory backend's is any key
 * naming its shared storage.
 */
export interface PersistenceContractHarness {
  /** The instance the test starts with. */
  readonly persistence: SessionPersistence
  /** Where the storage lives; `factory({ root })` opens another instance over it. */
  readonly root: string
  /**
   * Closes the most recent instance of this harness and opens a new one over
   * the same storage (a process restart). Resolves to the new instance.
   */
  reopen(): Promise<SessionPersistence>
  /**
   * Closes this harness's instances. A harness created without `root` owns its
   * storage and removes it; one opened over an existing `root` leaves it.
   */
  cleanup(): Promise<void>
  /**
   * Leaves an append that never committed after the last committed batch of
   * `id` in the storage (what a crash in the middle of an append leaves: a
   * torn frame, a row past the recorded end). Reads must ignore it.
   */
  tearTail(id: string): Promise<void>
  /**
   * Damages the stored batch of `id` that holds event `seq` (a flipped byte,
   * a body that no longer reads back), so that reading it fails its checks.
   */
  damageBatch(id: string, seq: number): Promise<void>
  /**
   * For a bounded change feed: prunes it once now, as a writer past its bound
   * does on its own — the horizon moves to where the previous pruning's
   * verbatim records began (its base), the base to the feed's head. A cursor
   * handed out before the previous pruning is then behind the horizon.
   * Omitted by a backend whose feed is never pruned.
   */
  pruneFeed?(): Promise<void>
  /**
   * Every stored copy of attachment bytes in the storage (a file, a row,
   * a blob), so the suite can count what a put, a fork or a delete stored:
   * its place, its byte length and, where the storage has one, its
   * permission bits.
   */
  storedAttachments?(): Promise<StoredAttachmentCopy[]>
}

/** One stored copy of attachment bytes (see `PersistenceContractHarness.storedAttachments`). */
export interface StoredAttachmentCopy {
  readonly place: string
  readonly bytes: number
  /** Permission bits (`mode & 0o777`) of a file. */
  readonly mode?: number
}

export interface PersistenceContractFactoryOptions {
  /** Open over this existing storage instead of a fresh, empty one. */
  readonly root?: string
}

/** Creates a backend over a fresh, empty storage root (or over `options.root`). */
export type PersistenceContractFactory = (
  options?: PersistenceContractFactoryOptions,
) => Promise<PersistenceContractHarness> | PersistenceContractHarness

/** Opens a harness that the suite cleans up after the test. */
export type FreshHarness = (options?: PersistenceContractFactoryOptions) => Promise<PersistenceContractHarness>

export const T0 = HEADER_CREATED_AT

/** A valid logical header for tests; `overrides` may change any field. */
export function header(id: string, overrides: HeaderFields = {}): SessionHeader {
  return headerOf(id, overrides)
}

export function target(h: SessionHeader, inheritedEventCount = 0): AppendTarget {
  return { header: h, inheritedEventCount: SessionLogOffset(inheritedEventCount) }
}

export function event(seq: number, type: string, data: JsonValue, time: number = T0 + seq): StoredSessionEvent {
  return { type, seq: SessionSeq(seq), time, data }
}

/** `count` plain events starting at `from`: a user message, then chunks. */
export function events(from: number, count: number, tag = 'e'): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) =>
    event(
      from + i,
      i === 0 ? 'user/message' : 'assistant/chunk',
      i === 0 ? { text: `${tag}${from}` } : { turn: 1, index: i, delta: `${tag}${from + i}` },
    ),
  )
}

export function snapshot(p: SessionPersistence): PersistenceMetrics {
  return { ...p.metrics }
}

export function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value)) as unknown
}

export async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  await expect(promise).rejects.toMatchObject({ code })
}

export function aborted(): AbortSignal {
  const controller = new AbortController()
  controller.abort()
  return controller.signal
}

export function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (!Object.isFrozen(value)) return false
  return Object.values(value).every(isDeepFrozen)
}
