import { costOfRollup, type SessionCost } from './cost.js'
import type { PriceTable } from './price-types.js'
import { type RollupInput, rollupSessionStats, type SessionStatsRollup } from './rollup.js'
import type { TokenCounts } from './stats-types.js'
import type { SessionTitle } from './title.js'

/** One session of a tree as a report reads it (the shape of `@dsh/subagent`'s `treeSnapshots` entries). */
export interface ReportInput extends RollupInput {
  readonly parentId: string | undefined
  readonly depth: number
  readonly subagent: boolean
  readonly rung: 1 | 2 | 3
  readonly snapshot?: RollupInput['snapshot'] & { readonly sessionTitle?: SessionTitle | null | undefined }
}

/** One session's line of a report: where it sits, how it was read, its title, tokens and turn time. */
export interface SessionStatsReportEntry {
  readonly id: string
  readonly parentId: string | null
  readonly depth: number
  readonly subagent: boolean
  readonly rung: 1 | 2 | 3
  readonly status: RollupInput['status']
  readonly title: string | null
  /** All its own tokens (every kind), or null when its stats could not be had. */
  readonly tokens: number | null
  /** Its own summed turn wall time, ms, or null. */
  readonly turnMs: number | null
  readonly problem?: { readonly code?: string; readonly message: string }
}

/**
 * What `dsh stats --json`, `GET /api/sessions/:id/stats` and the MCP tool
 * `session_stats` answer (`@dsh/protocol`'s `reportSessionStats` schema).
 */
export interface SessionStatsReport {
  readonly id: string
  readonly scope: 'session' | 'descendants'
  readonly title: string | null
  /** Every session counted or missing, depth-first, the root first. */
  readonly sessions: readonly SessionStatsReportEntry[]
  readonly rollup: SessionStatsRollup
  /**
   * Priced with the configured table (`usd: null` with reason `incomplete`
   * while the rollup has gaps); `null` with `costReason` when there is none.
   */
  readonly cost: SessionCost | null
  readonly costReason?: 'no-price-table'
}

/** Every token of a count, all kinds. */
export function totalTokens(tokens: TokenCounts): number {
  return tokens.input + tokens.output + tokens.cacheRead + tokens.cacheWrite + tokens.reasoning
}

/** The report of a tree's entries (the root first): the rollup, each session's line and, with `prices`, the cost. */
export function reportSessionStats(
  id: string,
  scope: SessionStatsReport['scope'],
  entries: readonly ReportInput[],
  prices?: PriceTable,
): SessionStatsReport {
  const rollup = rollupSessionStats(entries)
  const titleOf = (entry: ReportInput): string | null => entry.snapshot?.sessionTitle?.title ?? null
  const root = entries[0]
  return {
    id,
    scope,
    title: root === undefined ? null : titleOf(root),
    sessions: entries.map((entry) => {
      const stats = entry.status === 'ok' ? entry.snapshot?.sessionStats : undefined
      return {
        id: entry.id,
        parentId: entry.parentId ?? null,
        depth: entry.depth,
        subagent: entry.subagent,
        rung: entry.rung,
        status: entry.status,
        title: titleOf(entry),
        tokens: stats === undefined ? null : totalTokens(stats.tokens),
        turnMs: stats === undefined ? null : stats.turnMs,
        ...(entry.problem === undefined ? {} : { problem: entry.problem }),
      }
    }),
    rollup,
    ...(prices === undefined ? { cost: null, costReason: 'no-price-table' as const } : { cost: costOfRollup(rollup, prices) }),
  }
}
