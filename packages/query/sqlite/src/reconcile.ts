import type { Session, SessionId } from '@dsh/session'
import type { PersistedSessionRecord, SessionChanges, SessionRevision } from '@dsh/session-persistence'
import type { IndexProgress } from '@dsh/session-query'
import { fromPersistenceError, guarded, listPersisted } from '@dsh/session-query/backend'
import { type IndexUpkeep, readBodies } from './body-reads.js'
import type { ReconcileReport } from './query-types.js'
import type { RebuildReason } from './schema.js'

/**
 * The incremental reconciliation. It asks the persistence change feed what
 * changed since the cursor stored in the index: when the feed answers, only
 * the ids it names are looked at (nothing changed: no log and no header is
 * read); when it cannot prove completeness (first run, a missing or damaged
 * feed), one `persistence.list()` (header frames only) is compared with the
 * indexed revisions and rows of sessions no longer persisted are removed.
 * Either way the ids to read are recorded as pending in the same
 * transaction that advances the cursor, then brought up to date: a session
 * this process holds (live, or gone cold here) from memory once flushed
 * (`recordFromMemory`: no log read), any other by reading its log, where a
 * session whose indexed prefix still holds costs only its new batches
 * (`inspectFrom`).
 */
export async function reconcileIndex(
  upkeep: IndexUpkeep,
  rebuild: RebuildReason | undefined,
  onProgress: ((progress: IndexProgress) => void) | undefined,
  signal: AbortSignal,
): Promise<ReconcileReport> {
  const progress = (p: Omit<IndexProgress, 'rebuild'>): void => {
    try {
      onProgress?.(rebuild === undefined ? p : { ...p, rebuild })
    } catch (error) {
      upkeep.logger.warn('dsh: a query index progress callback failed.', error)
    }
  }
  progress({ phase: 'scan', done: 0, total: 0 })
  const since = upkeep.store().feedCursor()
  let feed: SessionChanges
  try {
    feed = await guarded(upkeep.persistence.changes(since, signal), signal)
  } catch (error) {
    throw fromPersistenceError(error, undefined, signal)
  }
  const liveIds = new Set<string>(upkeep.sessions.list().map((s) => s.id))
  let listed = 0
  let removed = 0
  if (feed.rescan) {
    // The cursor was taken before the listing: whatever changes meanwhile is in the feed after it.
    const records: PersistedSessionRecord[] = await listPersisted(upkeep, signal)
    listed = records.length
    progress({ phase: 'scan', done: listed, total: listed })
    removed = recordListing(upkeep, records, liveIds, feed.cursor)
  } else {
    progress({ phase: 'scan', done: feed.ids.length, total: feed.ids.length })
    const store = upkeep.store()
    if (feed.ids.length > 0 || feed.cursor !== since) {
      store.transaction(() => {
        for (const id of feed.ids) store.addPending(id)
        store.setFeedCursor(feed.cursor)
      })
    }
  }
  const known: Session[] = []
  const toRead: string[] = []
  for (const id of upkeep.store().pendingIds()) {
    const session = upkeep.known(id)
    if (session === undefined) toRead.push(id)
    else known.push(session)
  }
  // A session whose flush or stat failed is read from its log instead: what is durable is indexed.
  const unread = await recordFromMemory(upkeep, known, signal)
  toRead.push(...unread)
  const result = await readBodies(upkeep, toRead, signal, progress)
  return {
    ...(rebuild === undefined ? {} : { rebuild }),
    source: feed.rescan ? 'rescan' : 'feed',
    listed,
    changed: feed.rescan ? 0 : feed.ids.length,
    fromMemory: known.length - unread.length,
    read: toRead.length - result.skipped,
    readWhole: result.whole,
    removed: removed + result.removed,
    corrupt: result.corrupt,
    failed: result.failed,
  }
}

/**
 * A rescan's listing against the index, in one transaction with the feed
 * cursor: changed headers are written, changed bodies become pending, rows of
 * sessions neither listed nor live are removed (how many is returned).
 */
function recordListing(
  upkeep: IndexUpkeep,
  records: readonly PersistedSessionRecord[],
  liveIds: ReadonlySet<string>,
  cursor: SessionChanges['cursor'],
): number {
  const store = upkeep.store()
  const states = store.rowStates()
  let removed = 0
  store.transaction(() => {
    const listedIds = new Set<string>()
    for (const record of records) {
      const id = record.header.id
      listedIds.add(id)
      const state = states.get(id)
      if (state?.revision !== record.revision) store.writeHeader(record.header, record.inheritedEventCount, record.revision)
      if (state?.bodyRevision !== record.revision) store.addPending(id)
    }
    for (const id of states.keys()) {
      if (listedIds.has(id) || liveIds.has(id)) continue
      store.delete(id)
      store.clearPending(id)
      removed++
    }
    store.setFeedCursor(cursor)
  })
  return removed
}

/**
 * Sessions this process holds — live, or gone cold here since the last pass
 * — are indexed from memory: each live one is flushed first (its events up
 * to then are durable), then one `stat` gives the revision a listing
 * reports, and the text of the flushed events is written without reading
 * the log. A session gone cold was flushed when it was disposed. The body is
 * not marked as read at that revision (`bodyRevision` stays), so a later
 * change another process makes is still read from the log. Resolves to the
 * ids whose flush or stat failed: the caller reads them from their logs.
 */
export async function recordFromMemory(upkeep: IndexUpkeep, batch: readonly Session[], signal: AbortSignal | undefined): Promise<string[]> {
  if (batch.length === 0) return []
  const outcomes = await Promise.all(
    batch.map(async (session): Promise<{ session: Session; end: number; revision: SessionRevision | undefined } | undefined> => {
      const end = session.seq
      try {
        if (upkeep.sessions.get(session.id) === session) {
          if (upkeep.flush === undefined) return undefined
          await upkeep.flush(session)
        }
        return { session, end, revision: await upkeep.persistence.stat(session.id as SessionId, signal) }
      } catch (error) {
        if (signal?.aborted) throw error
        upkeep.logger.warn(`dsh: session '${session.id}' could not be flushed for the query index; its log is read instead.`, error)
        return undefined
      }
    }),
  )
  const unread: string[] = []
  const store = upkeep.store()
  store.transaction(() => {
    outcomes.forEach((outcome, i) => {
      if (outcome === undefined) {
        unread.push(batch[i]!.id)
        return
      }
      const { session, end, revision } = outcome
      if (revision === undefined) {
        // Not persisted (nothing durable yet, or deleted): not part of the corpus other processes see.
        store.delete(session.id)
        store.clearPending(session.id)
        return
      }
      const events = session.events
      store.writeHeader(session.header, session.inheritedEventCount, revision)
      store.writeBody(session.id, events.length === end ? events : events.slice(0, end), undefined)
      store.clearPending(session.id)
    })
  })
  return unread
}
