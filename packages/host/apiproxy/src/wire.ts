import {
  type EventSearchHitBody,
  eventSearchHit,
  type HistoryPageBody,
  type SessionSearchHitBody,
  type SubagentListRowBody,
  sessionHeader,
  sessionRecord,
  sessionSearchHit,
  subagentListRow,
  type WireSessionRecord,
  type WireStoredEvent,
} from '@dsh/protocol'
import type { StoredSessionEvent } from '@dsh/session'
import type { EventSearchHit, HistoryPage, SessionQueryRecord, SessionSearchHit } from '@dsh/session-query'
import type { ExplainedCatalogRow } from './services.js'

// Service values become wire values through the protocol schemas, which keep
// only the declared fields: a backend that carries extra (internal) fields on
// its records never leaks them onto the wire. Event data is lossless JSON by
// the session invariant and is passed as is.

export function wireRecord(record: SessionQueryRecord): WireSessionRecord {
  return sessionRecord.parse(record)
}

export function wireEvent(event: StoredSessionEvent): WireStoredEvent {
  return { type: event.type, seq: event.seq, time: event.time, data: event.data as WireStoredEvent['data'] }
}

export function wireHistory(page: HistoryPage): HistoryPageBody {
  return {
    header: sessionHeader.parse(page.header),
    inheritedEventCount: page.inheritedEventCount,
    events: page.events.map(wireEvent),
    ...(page.nextBefore === undefined ? {} : { nextBefore: page.nextBefore }),
    total: page.total,
  }
}

export function wireSubagentRow({ row, parentId, depth, rung }: ExplainedCatalogRow): SubagentListRowBody {
  return subagentListRow.parse({ ...row, parentId, depth, rung })
}

export function wireSessionHit(hit: SessionSearchHit): SessionSearchHitBody {
  return sessionSearchHit.parse(hit)
}

export function wireEventHit(hit: EventSearchHit): EventSearchHitBody {
  return eventSearchHit.parse(hit)
}
