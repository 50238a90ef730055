import { isDshError, type Logger } from '@dsh/context'
import { type Session, type SessionId, SessionLogOffset } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { SessionQueryRecord } from '@dsh/session-query'
import { fromPersistenceError, guarded, persistedRecord } from '@dsh/session-query/backend'
import { type DamagedLog, DamagedLogs } from './damaged-logs.js'
import type { IndexStore } from './index-store.js'

// A stale index answers as the index plus an overlay: the sessions it has
// not caught up with are taken from their logs, every other row as indexed.
// What is behind is what the persistence change feed names since the cursor
// the index records, plus the sessions it holds as pending (named by the
// feed, not yet read): O(changes), never a scan of every log.

/** What the index has not caught up with. */
export interface Behind {
  /** The feed cursor this answer was read at (search cursors are stamped with it). */
  readonly cursor: string
  /** Sessions whose indexed row may not be current, live sessions of this process left out. */
  readonly ids: readonly string[]
}

/**
 * The sessions the index is behind on. `undefined` when the feed cannot say
 * (the index never followed it, or the feed asks for a rescan: it was
 * missing, damaged or compacted past the cursor): then only a listing of
 * every log can answer. Reads the journal and the index, never a log.
 */
export async function behindIndex(
  store: IndexStore,
  persistence: SessionPersistence,
  live: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<Behind | undefined> {
  const since = store.feedCursor()
  if (since === undefined) return undefined
  const pending = store.pendingIds()
  let feed: Awaited<ReturnType<SessionPersistence['changes']>>
  try {
    feed = await guarded(persistence.changes(since, signal), signal)
  } catch (error) {
    throw fromPersistenceError(error, undefined, signal)
  }
  if (feed.rescan) return undefined
  const ids = new Set<string>([...feed.ids, ...pending])
  for (const id of live) ids.delete(id)
  return { cursor: feed.cursor, ids: [...ids] }
}

/** Past any log's end: `inspectFrom` here reads a log's header and tail and no event. */
const HEADER_ONLY = SessionLogOffset(Number.MAX_SAFE_INTEGER)

/**
 * The listed record of each of `ids` now: a session this process held
 * (`known`: gone cold here, its header in memory) costs one `stat`; any
 * other is read from its log, header and revision only (`inspectFrom` past
 * the end, so no event is decoded). `undefined` for a session no longer
 * persisted. A log whose tail cannot be read is listed as a listing of
 * headers (and a rebuild) lists it: its indexed record when the index holds
 * it at the log's revision now, else the header its header frame holds
 * (`DamagedLogs`); one whose header cannot be read either is left out and
 * reported.
 */
export async function currentRecords(
  store: IndexStore,
  persistence: SessionPersistence,
  ids: readonly string[],
  known: (id: string) => Session | undefined,
  concurrency: number,
  logger: Logger,
  signal: AbortSignal | undefined,
): Promise<Map<string, SessionQueryRecord | undefined>> {
  const out = new Map<string, SessionQueryRecord | undefined>()
  const damagedLogs = new DamagedLogs(persistence, signal)
  await eachBounded(ids, concurrency, async (id) => {
    const sid = id as SessionId
    const session = known(id)
    if (session !== undefined) {
      let revision: string | undefined
      try {
        revision = await guarded(persistence.stat(sid, signal), signal)
      } catch (error) {
        throw fromPersistenceError(error, id, signal)
      }
      out.set(
        id,
        revision === undefined
          ? undefined
          : persistedRecord({ header: session.header, inheritedEventCount: session.inheritedEventCount, revision }),
      )
      return
    }
    try {
      const tail = await guarded(persistence.inspectFrom(sid, HEADER_ONLY, signal), signal)
      out.set(id, persistedRecord(tail))
    } catch (error) {
      if (isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) out.set(id, undefined)
      else if (isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')) out.set(id, await damagedRecord(store, damagedLogs, id, logger, signal))
      else throw fromPersistenceError(error, id, signal)
    }
  })
  return out
}

async function damagedRecord(
  store: IndexStore,
  damagedLogs: DamagedLogs,
  id: string,
  logger: Logger,
  signal: AbortSignal | undefined,
): Promise<SessionQueryRecord | undefined> {
  let damaged: DamagedLog
  try {
    damaged = await damagedLogs.of(store, id)
  } catch (error) {
    throw fromPersistenceError(error, id, signal)
  }
  if (damaged === 'indexed') return store.record(id)
  if (damaged === 'gone') return undefined
  if (damaged !== 'unlisted') return persistedRecord(damaged)
  logger.warn(`dsh: the log of session '${id}' cannot be read, its header included; it is left out of this listing.`)
  return undefined
}

/** Runs `task` over `items`, at most `limit` at a time; rejects with the first failure once the running ones settled. */
export async function eachBounded<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) await task(items[next++]!)
  }
  const results = await Promise.allSettled(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker))
  const failed = results.find((r) => r.status === 'rejected')
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason
}
