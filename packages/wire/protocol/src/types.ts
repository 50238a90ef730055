import type { z } from 'zod'
import type { agentDefinitionEntry, agentDefinitionList } from './agent-definitions.js'
import type { compactionResult } from './compaction.js'
import type { listingCostReason } from './cost-reasons.js'
import type { errorBody } from './error-body.js'
import type { eventSearchHit, searchKind, searchPage, searchRequest, sessionSearchHit } from './search.js'
import type { historyPage, sessionHeader, sessionListEntry, sessionListPage, sessionRecord, storedEvent } from './session.js'
import type { sessionStatsEntry, sessionStatsReport, sessionStatsTotals, statsScope } from './stats.js'
import type { streamCatalog, streamEvent, streamProjection, streamReady, streamWritten } from './stream.js'
import type { subagentList, subagentListEntry, subagentListRow, subagentListRung, subagentScope } from './subagents.js'

// The types of the wire shapes, inferred from their schemas (never written by hand).

export type ErrorBody = z.infer<typeof errorBody>
export type CompactionResultBody = z.infer<typeof compactionResult>
export type WireSessionHeader = z.infer<typeof sessionHeader>
export type WireSessionRecord = z.infer<typeof sessionRecord>
export type WireSessionListEntry = z.infer<typeof sessionListEntry>
export type SessionListPageBody = z.infer<typeof sessionListPage>
export type WireStoredEvent = z.infer<typeof storedEvent>
export type HistoryPageBody = z.infer<typeof historyPage>
export type SubagentListEntryBody = z.infer<typeof subagentListEntry>
export type SubagentListRung = z.infer<typeof subagentListRung>
export type SubagentListRowBody = z.infer<typeof subagentListRow>
export type ListingCostReasonBody = z.infer<typeof listingCostReason>
export type SubagentScope = z.infer<typeof subagentScope>
export type SubagentListBody = z.infer<typeof subagentList>
export type SearchKind = z.infer<typeof searchKind>
export type WireSearchRequest = z.infer<typeof searchRequest>
export type SessionSearchHitBody = z.infer<typeof sessionSearchHit>
export type EventSearchHitBody = z.infer<typeof eventSearchHit>
export type SearchPageBody = z.infer<typeof searchPage>
export type SessionStatsReportBody = z.infer<typeof sessionStatsReport>
export type SessionStatsEntryBody = z.infer<typeof sessionStatsEntry>
export type SessionStatsTotalsBody = z.infer<typeof sessionStatsTotals>
export type StatsScope = z.infer<typeof statsScope>
export type StreamEventBody = z.infer<typeof streamEvent>
export type StreamReadyBody = z.infer<typeof streamReady>
export type StreamProjectionBody = z.infer<typeof streamProjection>
export type StreamCatalogBody = z.infer<typeof streamCatalog>
export type StreamWrittenBody = z.infer<typeof streamWritten>
export type AgentDefinitionEntryBody = z.infer<typeof agentDefinitionEntry>
export type AgentDefinitionListBody = z.infer<typeof agentDefinitionList>
