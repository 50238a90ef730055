import { type Session, type SessionHeader, sameLifecycle } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot, SessionProjections } from '@dsh/session-projection'
import { costOf, type ModelCostUnavailableReason } from './cost.js'
import type { PriceTable } from './price-types.js'
import { totalTokens } from './report.js'
import type { RollupInput } from './rollup.js'
import type { SessionStats } from './stats-types.js'
import { SESSION_STATS_KEY, SESSION_STATS_STATE_VERSION, sessionStatsUnit } from './stats-unit.js'
import { SESSION_TITLE_KEY, SESSION_TITLE_STATE_VERSION, type SessionTitle, sessionTitleUnit } from './title.js'

/**
 * Why a listed cost is `null` (never 0 in its place): a model's reason
 * (`costOf`), `no-price-table` (none configured) or `stats-unavailable` (the
 * session's `sessionStats` value could not be had: not cached yet for a
 * listing, a unit that failed, or a session the tree read could not read).
 */
export type ListingCostReason = ModelCostUnavailableReason | 'no-price-table' | 'stats-unavailable'

/** A listed session's cost: USD, or `null` with the reason (`costReason` is present exactly when `cost` is null). */
export type ListingCost = { readonly cost: number } | { readonly cost: null; readonly costReason: ListingCostReason }

/**
 * What a session listing shows of a session (`title`, `tokens`, `cost` of
 * `@dsh/protocol`'s listing entry, with `costReason` beside a null cost).
 * `null` is unknown: not cached, a unit that failed, or, for `cost`, no price
 * table or a model without a price (never 0 in its place).
 */
export interface ListingValues {
  readonly title: string | null
  readonly tokens: number | null
  readonly cost: number | null
  /** Why `cost` is null; present exactly when it is. */
  readonly costReason?: ListingCostReason
}

/** The units a listing reads, with the state version a cached row must carry. */
export const LISTING_UNITS = Object.freeze([
  Object.freeze({ key: SESSION_TITLE_KEY, stateVersion: SESSION_TITLE_STATE_VERSION }),
  Object.freeze({ key: SESSION_STATS_KEY, stateVersion: SESSION_STATS_STATE_VERSION }),
])

/** The keys of `LISTING_UNITS`, for a snapshot or cache lookup. */
export const LISTING_KEYS = Object.freeze([SESSION_TITLE_KEY, SESSION_STATS_KEY] as const)

/** The views a listing shows, as a snapshot has them (a key is absent when unknown). */
export interface ListingViews {
  readonly sessionTitle?: SessionTitle | null | undefined
  readonly sessionStats?: SessionStats | undefined
}

/** A session's cost as a listing shows it: its stats priced with `prices`, or `null` with the reason. */
export function listingCost(stats: SessionStats | undefined, prices: PriceTable | undefined): ListingCost {
  if (prices === undefined) return { cost: null, costReason: 'no-price-table' }
  if (stats === undefined) return { cost: null, costReason: 'stats-unavailable' }
  const priced = costOf(stats, prices)
  return priced.usd === null ? { cost: null, costReason: priced.reason } : { cost: priced.usd }
}

/** The listing values of a session's views (a live or cached snapshot); `prices` prices its tokens. */
export function listingValues(views: ListingViews | undefined, prices?: PriceTable): ListingValues {
  const stats = views?.sessionStats
  return {
    title: views?.sessionTitle?.title ?? null,
    tokens: stats === undefined ? null : totalTokens(stats.tokens),
    ...listingCost(stats, prices),
  }
}

/**
 * The cost of each session of a tree (`treeSnapshots` entries read with the
 * `sessionStats` key), priced as a listing entry's: `null` with the reason
 * for a session whose stats could not be had or that used a model without a
 * price.
 */
export function treeListingCosts(entries: readonly RollupInput[], prices: PriceTable): Map<string, ListingCost> {
  return new Map(entries.map((entry) => [entry.id, listingCost(entry.status === 'ok' ? entry.snapshot?.sessionStats : undefined, prices)]))
}

/** What `catalogListingCosts` reads a tree through: the subagent runtime's `treeSnapshots`. */
export interface CostTreeSource {
  treeSnapshots(
    rootId: string,
    keys: readonly 'sessionStats'[],
    options: { readonly descendants: true; readonly maxDepth?: number; readonly signal?: AbortSignal },
  ): Promise<readonly RollupInput[]>
}

/**
 * The cost of each row of a subagent catalog of `scope` under `rootId`
 * (`treeListingCosts` of its tree), reading the tree no deeper than the rows go:
 * the children's generation alone for `children`.
 */
export async function catalogListingCosts(
  source: CostTreeSource,
  rootId: string,
  scope: 'children' | 'descendants',
  prices: PriceTable,
  signal?: AbortSignal,
): Promise<Map<string, ListingCost>> {
  const options = {
    descendants: true as const,
    ...(scope === 'children' ? { maxDepth: 1 } : {}),
    ...(signal === undefined ? {} : { signal }),
  }
  return treeListingCosts(await source.treeSnapshots(rootId, [SESSION_STATS_KEY], options), prices)
}

/**
 * The listing values of cached unit states (decoded checkpoint rows, `undefined`
 * for a miss). Each state is checked against its unit's schema first — a
 * state that fails it is unknown, never shown — then viewed by the unit.
 */
export function listingValuesOfStates(states: { readonly [key: string]: unknown }, prices?: PriceTable): ListingValues {
  const title = sessionTitleUnit.schema.safeParse(states[SESSION_TITLE_KEY])
  const stats = sessionStatsUnit.schema.safeParse(states[SESSION_STATS_KEY])
  return listingValues(
    {
      sessionTitle: title.success ? sessionTitleUnit.view(title.data) : undefined,
      sessionStats: stats.success ? sessionStatsUnit.view(stats.data) : undefined,
    },
    prices,
  )
}

/** A listed session as a host reads its values (a `SessionQueryRecord` fits). */
export interface ListedSession {
  readonly header: SessionHeader
  readonly inheritedEventCount: number
  readonly live: boolean
}

/** What a host reads listing values from: its live sessions, then its checkpoint cache; never a log. */
export interface ListingSources {
  /** The live sessions (service `sessions`) and their views (`sessionProjections`), when the host has them. */
  readonly sessions?: { get(id: string): Session | undefined } | undefined
  readonly projections?: Pick<SessionProjections, 'snapshot'> | undefined
  /** The checkpoint cache (service `sessionProjectionCache`), when the host has one. */
  readonly cache?:
    | { cachedSnapshot(header: SessionHeader, cut: number, keys: readonly ProjectionKey[]): ProjectionSnapshot | undefined }
    | undefined
}

/**
 * The views of a listed session without reading its log: the live session's
 * own (when it is open here, same lifecycle), else its checkpoint at the
 * listed cut, else `undefined` (a later fold fills the cache). A cache fault
 * or a poisoned row is a miss, and so is a host without the units.
 */
export function listedViews(record: ListedSession, sources: ListingSources): ListingViews | undefined {
  try {
    const session = record.live ? sources.sessions?.get(record.header.id) : undefined
    if (session !== undefined && sources.projections !== undefined && sameLifecycle(session.header, record.header))
      return sources.projections.snapshot(session, LISTING_KEYS)
    return sources.cache?.cachedSnapshot(record.header, record.inheritedEventCount, LISTING_KEYS)
  } catch {
    // Units not registered here, a cache fault, a poisoned row: unknown, as a miss is.
    return undefined
  }
}

/** The listing values of a page's records, read from a host's live views and checkpoint cache (`listedViews`), priced with `prices`. */
export function listedValues(records: readonly ListedSession[], sources: ListingSources, prices?: PriceTable): ListingValues[] {
  return records.map((record) => listingValues(listedViews(record, sources), prices))
}
