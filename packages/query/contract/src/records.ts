import type { Session } from '@dsh/session'
import type { PersistedSessionRecord } from '@dsh/session-persistence'
import { encodeListCursor } from './cursor.js'
import type { ParsedListFilter } from './filter.js'
import { matchesFilter } from './filter.js'
import { compareKeys, recordKeyOf } from './order.js'
import type { SessionListPage, SessionQueryRecord } from './types.js'

/** The record of a live session; `persisted` describes its durable log, if any. */
export function liveRecord(session: Session, persisted: { readonly revision: string } | undefined): SessionQueryRecord {
  return Object.freeze({
    header: session.header,
    inheritedEventCount: session.inheritedEventCount,
    live: true,
    persisted: persisted !== undefined,
    ...(persisted === undefined ? {} : { revision: persisted.revision }),
  })
}

export function persistedRecord(record: PersistedSessionRecord): SessionQueryRecord {
  return Object.freeze({
    header: record.header,
    inheritedEventCount: record.inheritedEventCount,
    live: false,
    persisted: true,
    revision: record.revision,
  })
}

/**
 * The live-preferred corpus: every persisted record, with the live session's
 * header (and cut) replacing the persisted one for the same id, plus live
 * sessions that are not persisted yet. Unordered.
 */
export function mergeCorpus(persisted: readonly PersistedSessionRecord[], live: readonly Session[]): SessionQueryRecord[] {
  const liveById = new Map<string, Session>()
  for (const session of live) liveById.set(session.id, session)
  const out: SessionQueryRecord[] = []
  const seen = new Set<string>()
  for (const record of persisted) {
    const id = record.header.id
    if (seen.has(id)) continue
    seen.add(id)
    const session = liveById.get(id)
    out.push(session === undefined ? persistedRecord(record) : liveRecord(session, record))
  }
  for (const session of live) if (!seen.has(session.id)) out.push(liveRecord(session, undefined))
  return out
}

/**
 * One page of `records` under `filter`: the field conditions, then the
 * keyset position of the cursor, in listing order, cut at the page size.
 */
export function pageOf(records: readonly SessionQueryRecord[], filter: ParsedListFilter): SessionListPage {
  const after = filter.after
  const matching = records.filter(
    (r) => matchesFilter(r.header, filter) && (after === undefined || compareKeys(recordKeyOf(r.header), after) > 0),
  )
  matching.sort((a, b) => compareKeys(recordKeyOf(a.header), recordKeyOf(b.header)))
  if (filter.limit === undefined || matching.length <= filter.limit) return Object.freeze({ records: Object.freeze(matching) })
  const page = matching.slice(0, filter.limit)
  const last = page[page.length - 1]!
  return Object.freeze({ records: Object.freeze(page), nextCursor: encodeListCursor(filter.digest, recordKeyOf(last.header)) })
}
