import type { SessionHeader, StoredSessionEvent } from '@dsh/session'
import type { EventSearchHit, HistoryPage, SessionQueryRecord, SessionSearchHit } from '@dsh/session-query'
import type { EventSearchHitBody, HistoryPageBody, SessionSearchHitBody, SubagentListRowBody, WireSessionHeader, WireSessionRecord, WireStoredEvent } from './schemas.js'
import type { ExplainedCatalogRow } from './services.js'

// Explicit copies into the wire shapes: a backend that carries extra
// (internal) fields on its records never leaks them onto the wire.

export function wireHeader(header: SessionHeader): WireSessionHeader {
  return {
    version: header.version,
    id: header.id,
    createdAt: header.createdAt,
    ...(header.cwd === undefined ? {} : { cwd: header.cwd }),
    ...(header.parentSession === undefined ? {} : { parentSession: header.parentSession }),
    isSeeded: header.isSeeded,
    delegationDepth: header.delegationDepth,
    ...(header.origin === undefined ? {} : { origin: header.origin }),
    ...(header.agentPreset === undefined ? {} : { agentPreset: header.agentPreset }),
  }
}

export function wireRecord(record: SessionQueryRecord): WireSessionRecord {
  return {
    header: wireHeader(record.header),
    inheritedEventCount: record.inheritedEventCount,
    live: record.live,
    persisted: record.persisted,
    ...(record.revision === undefined ? {} : { revision: record.revision }),
  }
}

export function wireEvent(event: StoredSessionEvent): WireStoredEvent {
  return { type: event.type, seq: event.seq, time: event.time, data: event.data as WireStoredEvent['data'] }
}

export function wireHistory(page: HistoryPage): HistoryPageBody {
  return {
    header: wireHeader(page.header),
    inheritedEventCount: page.inheritedEventCount,
    events: page.events.map(wireEvent),
    ...(page.nextBefore === undefined ? {} : { nextBefore: page.nextBefore }),
    total: page.total,
  }
}

export function wireSubagentRow({ row, parentId, depth, rung }: ExplainedCatalogRow): SubagentListRowBody {
  if (row.kind === 'diagnostic') return { kind: 'diagnostic', id: row.id, reason: row.reason, parentId, depth, rung }
  const base = { kind: 'child' as const, id: row.id, activity: row.activity, hasChildren: row.hasChildren, parentId, depth, rung }
  if (row.mode === 'continuable') return { ...base, mode: 'continuable', label: row.label }
  return { ...base, mode: 'one-shot', ...(row.label === undefined ? {} : { label: row.label }) }
}

export function wireSessionHit(hit: SessionSearchHit): SessionSearchHitBody {
  return { record: wireRecord(hit.record), score: hit.score, matches: hit.matches }
}

export function wireEventHit(hit: EventSearchHit): EventSearchHitBody {
  return { id: hit.id, seq: hit.seq, type: hit.type, snippet: hit.snippet, score: hit.score }
}
