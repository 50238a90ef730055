import { elidedEvent } from './limits.js'
import type {
  AgentDefinitionEntryBody,
  AgentDefinitionListBody,
  EventSearchHitBody,
  HistoryPageBody,
  ListingCostReasonBody,
  SearchPageBody,
  SessionListPageBody,
  SessionSearchHitBody,
  SubagentListBody,
  SubagentListEntryBody,
  SubagentListRowBody,
  SubagentListRung,
  SubagentScope,
  WireSessionHeader,
  WireSessionRecord,
  WireStoredEvent,
} from './types.js'

// `@dsh/protocol/bodies`: service values become wire bodies here, in one
// place, for every producer (the HTTP host, the CLI's `--json`, the MCP
// server). Zod-free at run time (types only), so a short read command that
// prints a body loads no schema library.
//
// Invariants:
// - Each builder's result is typed by the protocol's inferred type, so a
//   schema change that a builder does not follow fails the typecheck.
// - A builder copies the declared fields only, in schema order, and an
//   optional field only when it has a value: a backend's internal fields
//   never reach the wire, and the bytes equal what the schema's `parse`
//   returns for the same value (tests/bodies.spec.ts holds both).
// - Event data is lossless JSON by the session invariant and is passed as is.
// Nothing is validated here; the sources are typed service values.

/** A service event (a `StoredSessionEvent` fits). */
export interface EventSource {
  readonly type: string
  readonly seq: number
  readonly time: number
  readonly data: unknown
}

/** A listing record (a `SessionQueryRecord` fits; other fields are dropped). */
export interface RecordSource {
  readonly header: WireSessionHeader
  readonly inheritedEventCount: number
  readonly live: boolean
  readonly persisted: boolean
  readonly revision?: string | undefined
}

/** A page of listing records (a `SessionListPage` fits). */
export interface ListPageSource {
  readonly records: readonly RecordSource[]
  readonly nextCursor?: string | undefined
}

/** What the projection cache holds of a listed session (`null`: not cached, or unknown). */
export interface ListingValuesSource {
  readonly title: string | null
  readonly tokens: number | null
  readonly cost: number | null
  /** Why `cost` is `null`, when known. */
  readonly costReason?: ListingCostReasonBody | undefined
}

const NO_VALUES: ListingValuesSource = Object.freeze({ title: null, tokens: null, cost: null })

/** A history page (a `HistoryPage` fits). */
export interface HistoryPageSource {
  readonly header: WireSessionHeader
  readonly inheritedEventCount: number
  readonly events: readonly EventSource[]
  readonly nextBefore?: number | undefined
  readonly total: number
}

/** A catalog row as the subagent runtime explains it (an `ExplainedSubagentEntry` fits). */
export interface CatalogRowSource {
  readonly row: SubagentListEntryBody
  readonly rung: SubagentListRung
  readonly parentId: string
  readonly depth: number
  /** The child's usage and span (`null` unknown); an `ExplainedSubagentEntry` always has all four. */
  readonly tokens?: number | null
  readonly durationMs?: number | null
  readonly startedAt?: number | null
  readonly endedAt?: number | null
  /** USD under the server's price table (`null` unknown); only the HTTP catalog prices rows. */
  readonly cost?: number | null
  /** Why `cost` is `null`, when known. */
  readonly costReason?: ListingCostReasonBody | undefined
  /** The child was closed; `null` unknown (an `ExplainedSubagentEntry` built by a catalog always has it). */
  readonly closed?: boolean | null | undefined
}

/** A matching session (a `SessionSearchHit` fits). */
export interface SessionHitSource {
  readonly record: RecordSource
  readonly score: number
  readonly matches: number
}

/** A matching event (an `EventSearchHit` fits). */
export interface EventHitSource {
  readonly id: string
  readonly seq: number
  readonly type: string
  readonly snippet: string
  readonly marks: readonly (readonly [number, number])[]
  readonly score: number
}

/** A page of search hits (a `SearchPage<T>` fits). */
export interface SearchPageSource<T> {
  readonly hits: readonly T[]
  readonly nextCursor?: string | undefined
}

/** `{ key: value }` when `value` is defined, else `{}` (optional wire fields are absent, never `undefined`). */
function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }
}

export function wireHeader(header: WireSessionHeader): WireSessionHeader {
  return {
    version: header.version,
    id: header.id,
    createdAt: header.createdAt,
    ...optional('cwd', header.cwd),
    ...optional('parentSession', header.parentSession),
    isSeeded: header.isSeeded,
    delegationDepth: header.delegationDepth,
    ...optional('origin', header.origin),
    ...optional('agentPreset', header.agentPreset),
  }
}

export function wireRecord(record: RecordSource): WireSessionRecord {
  return {
    header: wireHeader(record.header),
    inheritedEventCount: record.inheritedEventCount,
    live: record.live,
    persisted: record.persisted,
    ...optional('revision', record.revision),
  }
}

export function wireEvent(event: EventSource): WireStoredEvent {
  return { type: event.type, seq: event.seq, time: event.time, data: event.data as WireStoredEvent['data'] }
}

/** `GET /api/sessions`, `dsh sessions --json`, MCP `list_sessions`. */
/**
 * `values[i]` is what the cache holds of `page.records[i]`; a record without
 * one lists `null` for each.
 */
export function wireSessionList(page: ListPageSource, values: readonly (ListingValuesSource | undefined)[] = []): SessionListPageBody {
  return {
    sessions: page.records.map((record, i) => {
      const { title, tokens, cost, costReason } = values[i] ?? NO_VALUES
      return { ...wireRecord(record), title, tokens, cost, ...optional('costReason', cost === null ? costReason : undefined) }
    }),
    ...optional('nextCursor', page.nextCursor),
  }
}

/** The history routes, `dsh show --json`, MCP `show_session`. */
export function wireHistory(page: HistoryPageSource): HistoryPageBody {
  return {
    header: wireHeader(page.header),
    inheritedEventCount: page.inheritedEventCount,
    events: page.events.map(wireEvent),
    ...optional('nextBefore', page.nextBefore),
    total: page.total,
  }
}

/**
 * A history page within `maxBytes`: the UTF-8 bytes of its events' JSON
 * (the HTTP history routes and MCP `show_session` cap theirs at
 * `HISTORY_PAGE_MAX_BYTES` by default). Events are kept from the newest
 * back, and the page stops before the one that would take it past the cap;
 * `nextBefore` then continues from the oldest event kept, so a client pages
 * through everything. An event that alone is over the cap is answered as an
 * elided event (`page-too-large`) in its place. The newest event is always
 * kept (elided if need be), so every page makes progress.
 */
export function capHistoryPage(page: HistoryPageBody, maxBytes: number): HistoryPageBody {
  const { events } = page
  const kept: WireStoredEvent[] = []
  let used = 0
  let i = events.length - 1
  for (; i >= 0; i--) {
    let event = events[i] as WireStoredEvent
    let bytes = jsonBytes(event)
    if (bytes > maxBytes) {
      event = elidedEvent(event.seq, event.time, { bytes, reason: 'page-too-large', type: event.type })
      bytes = jsonBytes(event)
    }
    if (kept.length > 0 && used + bytes > maxBytes) break
    kept.push(event)
    used += bytes
  }
  if (i < 0 && kept.every((event, k) => event === events[events.length - 1 - k])) return page
  kept.reverse()
  const nextBefore = i >= 0 ? (kept[0] as WireStoredEvent).seq : page.nextBefore
  const { header, inheritedEventCount, total } = page
  return { header, inheritedEventCount, events: kept, ...optional('nextBefore', nextBefore), total }
}

/** UTF-8 bytes of an event's JSON, counted without encoding it: the protocol package assumes no Node API (no `Buffer`). */
function jsonBytes(event: WireStoredEvent): number {
  const text = JSON.stringify(event)
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) continue
    if (unit < 0x800) bytes += 1
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      // A surrogate pair: two code units, four bytes.
      bytes += 2
      i++
    } else bytes += 2
  }
  return bytes
}

export function wireSubagentRow({
  row,
  parentId,
  depth,
  rung,
  tokens,
  durationMs,
  startedAt,
  endedAt,
  cost,
  costReason,
  closed,
}: CatalogRowSource): SubagentListRowBody {
  const place = {
    parentId,
    depth,
    rung,
    ...optional('tokens', tokens),
    ...optional('durationMs', durationMs),
    ...optional('startedAt', startedAt),
    ...optional('endedAt', endedAt),
    ...optional('cost', cost),
    ...optional('costReason', cost === null ? costReason : undefined),
    ...optional('closed', closed),
  }
  if (row.kind === 'diagnostic') return { kind: row.kind, id: row.id, reason: row.reason, ...place }
  const child = { kind: row.kind, id: row.id, activity: row.activity, hasChildren: row.hasChildren }
  if (row.mode === 'continuable') return { ...child, mode: row.mode, label: row.label, ...place }
  return { ...child, mode: row.mode, ...optional('label', row.label), ...place }
}

/** `GET /api/sessions/:id/subagents`, `dsh agents --json`, MCP `list_agents`. */
export function wireSubagentList(parentId: string, scope: SubagentScope, rows: readonly CatalogRowSource[]): SubagentListBody {
  return { parentId, scope, rows: rows.map(wireSubagentRow) }
}

export function wireSessionHit(hit: SessionHitSource): SessionSearchHitBody {
  return { record: wireRecord(hit.record), score: hit.score, matches: hit.matches }
}

export function wireEventHit(hit: EventHitSource): EventSearchHitBody {
  return {
    id: hit.id,
    seq: hit.seq,
    type: hit.type,
    snippet: hit.snippet,
    marks: hit.marks.map(([start, end]) => [start, end]),
    score: hit.score,
  }
}

/** `GET /api/search?kind=sessions`, `dsh search --json`, MCP `search`. */
export function wireSessionSearch(page: SearchPageSource<SessionHitSource>): SearchPageBody {
  return { kind: 'sessions', hits: page.hits.map(wireSessionHit), ...optional('nextCursor', page.nextCursor) }
}

/** `GET /api/search?kind=events`, `dsh search --events --json`, MCP `search` with `kind: 'events'`. */
export function wireEventSearch(page: SearchPageSource<EventHitSource>): SearchPageBody {
  return { kind: 'events', hits: page.hits.map(wireEventHit), ...optional('nextCursor', page.nextCursor) }
}

/** A listed agent definition (an `@dsh/agent-definitions` `ListedAgentDefinition` fits; its other fields are dropped). */
export interface AgentDefinitionSource {
  readonly name: string
  readonly description: string
  readonly provider?: string | undefined
  readonly model?: string | undefined
  readonly tools?: readonly string[] | undefined
  readonly budgets?:
    | {
        readonly maxTokens?: number | undefined
        readonly maxCostUsd?: number | undefined
        readonly maxWallMs?: number | undefined
        readonly maxTurns?: number | undefined
      }
    | undefined
  readonly file: string
  readonly scope: 'root' | 'project'
  readonly overrides?: string | undefined
}

export function wireAgentDefinition(definition: AgentDefinitionSource): AgentDefinitionEntryBody {
  const budgets = definition.budgets
  return {
    name: definition.name,
    description: definition.description,
    ...optional('provider', definition.provider),
    ...optional('model', definition.model),
    ...optional('tools', definition.tools === undefined ? undefined : [...definition.tools]),
    ...optional(
      'budgets',
      budgets === undefined
        ? undefined
        : {
            ...optional('maxTokens', budgets.maxTokens),
            ...optional('maxCostUsd', budgets.maxCostUsd),
            ...optional('maxWallMs', budgets.maxWallMs),
            ...optional('maxTurns', budgets.maxTurns),
          },
    ),
    file: definition.file,
    scope: definition.scope,
    ...optional('overrides', definition.overrides),
  }
}

/** `dsh agents --definitions --json`. */
export function wireAgentDefinitionList(
  directories: readonly { readonly scope: 'root' | 'project'; readonly dir: string }[],
  definitions: readonly AgentDefinitionSource[],
): AgentDefinitionListBody {
  return {
    directories: directories.map((directory) => ({ scope: directory.scope, dir: directory.dir })),
    definitions: definitions.map(wireAgentDefinition),
  }
}
