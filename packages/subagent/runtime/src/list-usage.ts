import type { ProjectionKey, ProjectionSnapshot, SessionProjections } from '@dsh/session-projection'
import { SUBAGENT_TIMING_KEY } from './projection.js'

/**
 * What a catalog row shows of a child's usage, read down the same ladder as
 * its identity and never at the cost of a read of its own:
 *
 * - `tokens`: every token the child's own model calls used (input, output,
 *   cache reads and writes, reasoning), from the `sessionStats` unit of
 *   `@dsh/session-stats` when the host registers it;
 * - `durationMs`: the time the child spent in its own settled turns, from the
 *   runtime's `subagentTiming` unit (a turn still running is not counted);
 * - `startedAt`, `endedAt`: the wall-clock span (epoch ms) of its own turns,
 *   from its descriptor to its latest turn start or end, from the same unit;
 * - `closed`: whether it has been closed (`close`: it takes no further
 *   input), from the same unit. Not usage, but it comes from the same read.
 *
 * `null` is unknown: the unit is not registered, failed for that child, or
 * its checkpoint is not cached. A cold child whose identity came from the
 * checkpoint cache takes its usage from the cache too; a miss there is `null`
 * and never costs a body read. A child read whole (rung 3) folds its usage
 * from that same read.
 */
export interface SubagentUsage {
  readonly tokens: number | null
  readonly durationMs: number | null
  readonly startedAt: number | null
  readonly endedAt: number | null
  readonly closed: boolean | null
}

/** The key of `@dsh/session-stats`'s unit (not a dependency of this package: a host registers it or not). */
export const SESSION_STATS_KEY = 'sessionStats'

export const UNKNOWN_USAGE: SubagentUsage = Object.freeze({
  tokens: null,
  durationMs: null,
  startedAt: null,
  endedAt: null,
  closed: null,
})

/** The usage units `projections` has registered (timing always comes with the subagent units). */
export function usageKeys(projections: SessionProjections): readonly ProjectionKey[] {
  const registered: readonly string[] = projections.keys()
  return [SUBAGENT_TIMING_KEY, SESSION_STATS_KEY].filter((key) => registered.includes(key)) as ProjectionKey[]
}

/** The usage in a snapshot (a key it lacks is unknown). */
export function usageOf(snapshot: ProjectionSnapshot | undefined): SubagentUsage {
  if (snapshot === undefined) return UNKNOWN_USAGE
  const views = snapshot as { readonly [key: string]: unknown }
  const timing = views[SUBAGENT_TIMING_KEY] as { readonly [field: string]: unknown } | null | undefined
  return Object.freeze({
    tokens: tokensOf(views[SESSION_STATS_KEY]),
    durationMs: numberOf(timing?.settledMs),
    startedAt: numberOf(timing?.startedAt),
    endedAt: numberOf(timing?.endedAt),
    closed: typeof timing?.closed === 'boolean' ? timing.closed : null,
  })
}

/** The sum of a stats view's token counts (its kinds are disjoint, so the sum counts each token once). */
function tokensOf(view: unknown): number | null {
  const tokens = (view as { readonly tokens?: unknown } | null | undefined)?.tokens
  if (typeof tokens !== 'object' || tokens === null) return null
  let total = 0
  for (const count of Object.values(tokens)) {
    if (typeof count !== 'number') return null
    total += count
  }
  return total
}

function numberOf(value: unknown): number | null {
  return typeof value === 'number' ? value : null
}
