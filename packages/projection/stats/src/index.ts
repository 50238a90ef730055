export type { CostUnavailableReason, ModelCost, ModelCostUnavailableReason, SessionCost } from './cost.js'
export { costOf, costOfRollup } from './cost.js'
export type { SessionStatsErrorCode } from './errors.js'
export { SessionStatsError } from './errors.js'
export type {
  CostTreeSource,
  ListedSession,
  ListingCost,
  ListingCostReason,
  ListingSources,
  ListingValues,
  ListingViews,
} from './listing.js'
export {
  catalogListingCosts,
  LISTING_KEYS,
  LISTING_UNITS,
  listedValues,
  listedViews,
  listingCost,
  listingValues,
  listingValuesOfStates,
  treeListingCosts,
} from './listing.js'
export { registerSessionStatsUnits, sessionStatsPlugin } from './plugin.js'
export { PRICE_TABLE_MAX_BYTES, parsePriceTable, readPriceTable } from './price-table.js'
export type { ModelPrice, PriceTable } from './price-types.js'
export type { ReportInput, SessionStatsReport, SessionStatsReportEntry } from './report.js'
export { reportSessionStats, totalTokens } from './report.js'
export type { RollupGap, RollupInput, SessionStatsRollup, SessionStatsTotals } from './rollup.js'
export { rollupSessionStats, sumSessionStats } from './rollup.js'
export type {
  ModelUsage,
  SessionStats,
  SessionStatsState,
  SkipCounts,
  SkipReason,
  TokenCounts,
  TokenKind,
  ToolUsage,
} from './stats-types.js'
export { SKIP_REASONS, TOKEN_KINDS } from './stats-types.js'
export { MAX_PENDING_CALLS, SESSION_STATS_KEY, SESSION_STATS_STATE_VERSION, sessionStatsUnit } from './stats-unit.js'
export type { SessionTitle, SessionTitleEventData, SessionTitleState } from './title.js'
export {
  appendSessionTitle,
  normalizeTitle,
  SESSION_TITLE_EVENT,
  SESSION_TITLE_KEY,
  SESSION_TITLE_STATE_VERSION,
  sessionTitleUnit,
  TITLE_MAX_LENGTH,
} from './title.js'
