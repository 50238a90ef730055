// @dsh/protocol: every shape that crosses a process boundary, declared once
// as a zod schema, and the HTTP route table. Depends on zod alone.

export { agentBudgets, agentDefinitionEntry, agentDefinitionList, agentDefinitionScope, agentDirectory } from './agent-definitions.js'
export { COMPACT_MAX_KEEP, compactionResult, compactQuery } from './compaction.js'
export { costUnavailableReason, listingCostReason } from './cost-reasons.js'
export { errorBody } from './error-body.js'
export type { ProtocolErrorCode } from './errors.js'
export { ProtocolError } from './errors.js'
export {
  CURSOR_MAX_LENGTH,
  ID_MAX_LENGTH,
  PAGE_DEFAULT_LIMIT,
  PAGE_MAX_LIMIT,
  PARAM_MAX_LENGTH,
  SEARCH_MAX_TERMS,
  SEARCH_MAX_TEXT,
  SEARCH_PAGE_DEFAULT_LIMIT,
  SEARCH_PAGE_MAX_LIMIT,
  searchTerms,
} from './limits.js'
export { openApiDocumentBody } from './openapi-body.js'
export { cursorParam, idParam, nonNegativeInt, sessionId } from './primitives.js'
export type { ApiRoute, AuthMode, RouteName, RouteParams, RoutePath, RouteQuery, RouteReading, RouteResponse } from './routes.js'
export { buildTarget, describeIssues, matchPath, readRequest, routeSegments, routes } from './routes.js'
export { eventSearchHit, searchKind, searchPage, searchQuery, searchRequest, searchText, sessionSearchHit } from './search.js'
export {
  historyPage,
  historyQuery,
  listSessionsQuery,
  sessionHeader,
  sessionListEntry,
  sessionListPage,
  sessionRecord,
  storedEvent,
} from './session.js'
export {
  sessionCost,
  sessionStatsEntry,
  sessionStatsReport,
  sessionStatsTotals,
  statsQuery,
  statsScope,
  tokenCounts,
} from './stats.js'
export { STREAM_EVENT_NAMES, streamCatalog, streamEvent, streamProjection, streamReady, streamWritten } from './stream.js'
export { subagentList, subagentListEntry, subagentListRow, subagentListRung, subagentScope, subagentsQuery } from './subagents.js'
export type * from './types.js'
