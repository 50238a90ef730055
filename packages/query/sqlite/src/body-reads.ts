import { isDshError, type Logger } from '@dsh/context'
import { type Session, type SessionId, SessionLogOffset } from '@dsh/session'
import type { SessionPersistence, SessionSuffixObservation } from '@dsh/session-persistence'
import type { IndexProgress, LiveSessions } from '@dsh/session-query'
import { fromPersistenceError } from '@dsh/session-query/backend'
import { type DamagedLog, DamagedLogs } from './damaged-logs.js'
import type { IndexStore } from './index-store.js'

/** What index upkeep works on: the sources, the open store and where problems go. */
export interface IndexUpkeep {
  readonly sessions: LiveSessions
  readonly persistence: SessionPersistence
  readonly logger: Logger
  /** Concurrent body reads (at least 1). */
  readonly readConcurrency: number
  /** Makes a live session's events durable (the `sessions` store's `flush`); without it, live sessions are read from their logs. */
  readonly flush?: ((session: Session) => Promise<void>) | undefined
  /** A session this process holds under `id`: live, or gone cold here and not yet indexed. */
  known(id: string): Session | undefined
  /** The open store; throws `SESSION_QUERY_CLOSED` once the query is closed. */
  store(): IndexStore
  /** Whether the query is closed: what was read is then not written. */
  closed(): boolean
}

/** What one pass of body reads did. */
export interface BodyReads {
  readonly corrupt: number
  readonly failed: number
  readonly removed: number
  /** Logs read whole because their indexed prefix no longer held. */
  readonly whole: number
  /** Ids that needed no read: unchanged since indexed, or no longer persisted. */
  readonly skipped: number
}

/** Indexed text is written in transactions of this many sessions. */
const WRITE_BATCH = 128

type Progress = (progress: Omit<IndexProgress, 'rebuild'>) => void

interface ReadOutcome {
  readonly id: string
  readonly observation?: SessionSuffixObservation | 'unchanged'
  readonly error?: unknown
  /** With a `SESSION_PERSISTENCE_CORRUPT` error: what a listing of headers shows of the log. */
  readonly damaged?: DamagedLog
}

/**
 * Reads the pending `ids` (`readConcurrency` at a time) and writes their text
 * in batched transactions. A session whose indexed prefix still holds is read
 * from its last indexed event on (`inspectFrom`), and only the events after
 * it are indexed; a new, re-created or rewritten one is read whole. A log
 * that cannot be read keeps the row a rebuild gives it: its header as a
 * listing of headers shows it, at the log's revision, without text
 * (`DamagedLogs`). Whatever was read before a cancellation is written: the
 * next pass resumes from there.
 */
export async function readBodies(upkeep: IndexUpkeep, ids: readonly string[], signal: AbortSignal, progress: Progress): Promise<BodyReads> {
  const total = ids.length
  const counts = { done: 0, corrupt: 0, failed: 0, removed: 0, whole: 0, unchanged: 0, missing: 0 }
  let next = 0
  let pending: ReadOutcome[] = []
  const damagedLogs = new DamagedLogs(upkeep.persistence, signal)
  progress({ phase: 'index', done: 0, total })
  const flush = (): void => {
    if (pending.length === 0) return
    const batch = pending
    pending = []
    writeOutcomes(upkeep, batch, counts)
    progress({ phase: 'index', done: counts.done, total })
  }
  const read = async (id: string): Promise<SessionSuffixObservation | 'unchanged'> => {
    const change = await readChange(upkeep.store(), upkeep.persistence, id, signal)
    if (change === 'unchanged') counts.unchanged++
    else if (change.rewritten) counts.whole++
    return change === 'unchanged' ? change : change.observation
  }
  const damaged = async (id: string, error: unknown): Promise<ReadOutcome> => {
    try {
      return { id, error, damaged: await damagedLogs.of(upkeep.store(), id) }
    } catch (failure) {
      if (signal.aborted || isDshError(failure, 'CANCELLED')) throw fromPersistenceError(failure, id, signal)
      // What a listing shows of it is not known: left pending for the next pass.
      return { id, error: failure }
    }
  }
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++]!
      try {
        // Await first: `pending` may be swapped by a flush while this read is in flight.
        const observation = await read(id)
        pending.push({ id, observation })
      } catch (error) {
        if (signal.aborted || isDshError(error, 'CANCELLED')) throw fromPersistenceError(error, id, signal)
        const outcome = isDshError(error, 'SESSION_PERSISTENCE_CORRUPT') ? await damaged(id, error) : { id, error }
        pending.push(outcome)
      }
      counts.done++
      if (pending.length >= WRITE_BATCH) flush()
    }
  }
  const workers = Array.from({ length: Math.min(Math.max(1, upkeep.readConcurrency), Math.max(1, ids.length)) }, worker)
  try {
    await Promise.all(workers)
  } finally {
    if (!upkeep.closed()) flush()
  }
  const { corrupt, failed, removed, whole, unchanged, missing } = counts
  return { corrupt, failed, removed, whole, skipped: unchanged + missing }
}

/** Writes one batch of read outcomes in one transaction, counting what happened. */
function writeOutcomes(
  upkeep: IndexUpkeep,
  batch: readonly ReadOutcome[],
  counts: { corrupt: number; failed: number; removed: number; missing: number },
): void {
  const store = upkeep.store()
  store.transaction(() => {
    for (const item of batch) {
      const observation = item.observation
      if (observation === 'unchanged') {
        store.clearPending(item.id)
      } else if (observation !== undefined) {
        store.writeHeader(observation.header, observation.inheritedEventCount, observation.revision)
        if (store.writeBody(item.id, observation.events, observation.revision, observation.from)) store.clearPending(item.id)
        else {
          // Another process re-indexed this row between the read and now: the next pass reads it again.
          counts.failed++
        }
      } else if (isDshError(item.error, 'SESSION_PERSISTENCE_NOT_FOUND') || item.damaged === 'gone') {
        counts.missing++
        if (store.rowState(item.id) !== undefined) counts.removed++
        store.delete(item.id)
        store.clearPending(item.id)
      } else if (isDshError(item.error, 'SESSION_PERSISTENCE_CORRUPT') && item.damaged !== undefined) {
        counts.corrupt++
        const damaged = item.damaged
        if (damaged === 'indexed') {
          const revision = store.rowState(item.id)?.revision
          if (revision != null) store.markCorrupt(item.id, revision)
        } else if (damaged === 'unlisted') {
          // No listing of headers shows it: a rebuild leaves it out too.
          store.delete(item.id)
        } else {
          // Its header as listed (another lifecycle's row drops its text), then no text at that revision.
          store.writeHeader(damaged.header, damaged.inheritedEventCount, damaged.revision)
          store.markCorrupt(item.id, damaged.revision)
        }
        store.clearPending(item.id)
      } else {
        counts.failed++
        upkeep.logger.warn(`dsh: could not read session '${item.id}' for the query index; the next reconciliation retries it.`, item.error)
      }
    }
  })
}

/** What `readChange` found: the log's events from where the index must take them up. */
export type ReadChange =
  | 'unchanged'
  | {
      readonly observation: SessionSuffixObservation
      /** The indexed text does not continue into this log (re-created or rewritten): `observation` is the whole log. */
      readonly rewritten: boolean
    }

/**
 * Reads what changed in the log of `id` since the index took its text: a
 * row whose text was read at its listed revision costs one `stat` when the
 * log did not move (`'unchanged'`); a row whose indexed prefix still holds,
 * only the batches from its last indexed event (`inspectFrom`); a new log,
 * or a re-created or rewritten one (`rewritten`), whole. Only reads the store.
 */
export async function readChange(
  store: IndexStore,
  persistence: SessionPersistence,
  id: string,
  signal: AbortSignal | undefined,
): Promise<ReadChange> {
  const sid = id as SessionId
  // The feed also names changes that a writer already indexed: one stat tells whether the log moved since.
  const state = store.rowState(id)
  if (state?.revision != null && state.bodyRevision === state.revision) {
    const revision = await persistence.stat(sid, signal)
    if (revision === state.revision) return 'unchanged'
  }
  const from = store.suffixStart(id)
  const suffix = await persistence.inspectFrom(sid, SessionLogOffset(from), signal)
  if (store.continues(id, suffix.header, suffix.inheritedEventCount, suffix.events, suffix.from))
    return { observation: suffix, rewritten: false }
  // The indexed prefix does not hold: the log was re-created or rewritten under this id.
  return { observation: from === 0 ? suffix : await persistence.inspectFrom(sid, SessionLogOffset(0), signal), rewritten: true }
}
