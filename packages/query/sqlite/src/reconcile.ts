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
 * transaction that advances the cursor, then read: a session whose indexed
 * prefix still holds costs only its new batches (`inspectFrom`). Live
 * sessions are skipped (they are answered from memory) and stay pending.
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
  const toRead = upkeep
    .store()
    .pendingIds()
    .filter((id) => !liveIds.has(id))
  const result = await readBodies(upkeep, toRead, signal, progress)
  return {
    ...(rebuild === undefined ? {} : { rebuild }),
    source: feed.rescan ? 'rescan' : 'feed',
    listed,
    changed: feed.rescan ? 0 : feed.ids.length,
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
 * Sessions that went cold in this process: their rows take the persisted
 * revision (one `stat` each, no body read), the header they had live and
 * their text from memory. A session that was never persisted leaves the
 * corpus. Their text is verified lazily against the log (a suffix read from
 * the last indexed event), before the next search or by the next
 * reconciliation, in this process or the next. Resolves to the sessions
 * whose `stat` failed, to be tried again at the next query.
 */
export async function refreshCold(upkeep: IndexUpkeep, batch: readonly Session[], signal: AbortSignal | undefined): Promise<Session[]> {
  const revisions = await Promise.all(
    batch.map((s) =>
      upkeep.persistence.stat(s.id as SessionId, signal).then(
        (r): { r: SessionRevision | undefined } => ({ r }),
        (error: unknown) => ({ error }),
      ),
    ),
  )
  const retry: Session[] = []
  const store = upkeep.store()
  store.transaction(() => {
    batch.forEach((session, i) => {
      const result = revisions[i]!
      if ('error' in result) {
        upkeep.logger.warn(`dsh: could not stat session '${session.id}' for the query index; retrying at the next query.`, result.error)
        retry.push(session)
        return
      }
      if (upkeep.sessions.get(session.id) !== undefined) return
      if (result.r === undefined) {
        store.delete(session.id)
        store.clearPending(session.id)
        return
      }
      const state = store.rowState(session.id)
      if (state?.revision !== result.r) store.writeHeader(session.header, session.inheritedEventCount, result.r)
      if (store.rowState(session.id)?.bodyRevision !== result.r) {
        // Its text from memory now (appending only what is new); verified against the log before any search sees it.
        store.writeBody(session.id, session.events, undefined)
        store.addPending(session.id)
      }
    })
  })
  return retry
}

/** Indexes the text of live sessions from memory (no log read), appending only what is new. */
export function syncLive(upkeep: IndexUpkeep): void {
  const store = upkeep.store()
  const stale = upkeep.sessions.list().filter((s) => {
    const row = store.indexedCount(s.id)
    return row === undefined || row.count !== s.seq || row.inherited !== s.inheritedEventCount || row.header !== JSON.stringify(s.header)
  })
  if (stale.length === 0) return
  store.transaction(() => {
    for (const session of stale) {
      store.writeHeader(session.header, session.inheritedEventCount, store.rowState(session.id) === undefined ? null : 'keep')
      store.writeBody(session.id, session.events, undefined)
    }
  })
}
