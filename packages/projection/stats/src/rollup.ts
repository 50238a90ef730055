import type { ModelUsage, SessionStats, SkipCounts, TokenCounts, ToolUsage } from './stats-types.js'
import { SKIP_REASONS, TOKEN_KINDS } from './stats-types.js'

/** Totals over several sessions: a `SessionStats` without the per-session fork cut. */
export type SessionStatsTotals = Omit<SessionStats, 'inheritedEventCount'>

/**
 * One session of a tree as a rollup reads it (the shape of `@dsh/subagent`'s
 * `treeSnapshots` entries): its `sessionStats` value when it could be had, or
 * why not.
 */
export interface RollupInput {
  readonly id: string
  readonly status: 'ok' | 'unavailable' | 'corrupt'
  readonly snapshot?: { readonly sessionStats?: SessionStats | undefined }
  readonly problem?: { readonly code?: string; readonly message: string }
}

/** A session left out of the totals, and why. */
export interface RollupGap {
  readonly id: string
  readonly status: 'unavailable' | 'corrupt'
  readonly problem?: { readonly code?: string; readonly message: string }
}

export interface SessionStatsRollup {
  /** Sessions whose stats are in `totals`. */
  readonly sessions: number
  readonly totals: SessionStatsTotals
  /** Sessions whose stats could not be had: the totals are a lower bound while any is listed. */
  readonly gaps: readonly RollupGap[]
  /** True when every session of the tree is counted (`gaps` is empty). */
  readonly complete: boolean
}

const add = (a: number, b: number): number => a + b

function addTokens(a: TokenCounts, b: TokenCounts): TokenCounts {
  const out = { ...a }
  for (const kind of TOKEN_KINDS) out[kind] = a[kind] + b[kind]
  return out
}

function addSkips(a: SkipCounts, b: SkipCounts): SkipCounts {
  const out = { ...a }
  for (const reason of SKIP_REASONS) out[reason] = a[reason] + b[reason]
  return out
}

function mergeBy<T>(lists: readonly (readonly T[])[], keyOf: (item: T) => string, merge: (a: T, b: T) => T): T[] {
  const merged = new Map<string, T>()
  for (const list of lists) {
    for (const item of list) {
      const key = keyOf(item)
      const seen = merged.get(key)
      merged.set(key, seen === undefined ? item : merge(seen, item))
    }
  }
  return [...merged.values()]
}

/**
 * Sums `sessionStats` values: counts, wall times and tokens add up; models
 * merge by provider and model, tools by name. Each value already counts only
 * its own session's suffix, so a tree of forks sums without double counting.
 */
export function sumSessionStats(stats: readonly SessionStats[]): SessionStatsTotals {
  const sum = (field: 'turns' | 'steps' | 'turnMs' | 'modelMs' | 'toolMs' | 'toolCalls' | 'toolErrors' | 'compactions') =>
    stats.map((s) => s[field]).reduce(add, 0)
  const firstCount = stats.map((s) => s.firstToken.count).reduce(add, 0)
  const firstMs = stats.map((s) => s.firstToken.totalMs).reduce(add, 0)
  const byModel = mergeBy<ModelUsage>(
    stats.map((s) => s.byModel),
    (usage) => JSON.stringify([usage.provider, usage.model]),
    (a, b) => ({
      ...a,
      calls: a.calls + b.calls,
      callsWithoutUsage: a.callsWithoutUsage + b.callsWithoutUsage,
      tokens: addTokens(a.tokens, b.tokens),
    }),
  )
  const tools = mergeBy<ToolUsage>(
    stats.map((s) => s.tools),
    (usage) => usage.name,
    (a, b) => ({ name: a.name, calls: a.calls + b.calls, errors: a.errors + b.errors, ms: a.ms + b.ms }),
  )
  return {
    turns: sum('turns'),
    steps: sum('steps'),
    turnMs: sum('turnMs'),
    modelMs: sum('modelMs'),
    toolMs: sum('toolMs'),
    firstToken: { count: firstCount, totalMs: firstMs, meanMs: firstCount === 0 ? null : firstMs / firstCount },
    tokens: byModel.map((usage) => usage.tokens).reduce(addTokens, { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 }),
    byModel,
    tools,
    toolCalls: sum('toolCalls'),
    toolErrors: sum('toolErrors'),
    compactions: sum('compactions'),
    skipped: stats.map((s) => s.skipped).reduce(addSkips, Object.fromEntries(SKIP_REASONS.map((r) => [r, 0])) as SkipCounts),
  }
}

/**
 * The rollup of a tree's entries: the sum of every `ok` entry's stats, and
 * every other entry as a gap with its reason (never silently skipped). An
 * `ok` entry without a `sessionStats` value is a gap too (`unavailable`).
 */
export function rollupSessionStats(entries: readonly RollupInput[]): SessionStatsRollup {
  const counted: SessionStats[] = []
  const gaps: RollupGap[] = []
  for (const entry of entries) {
    const stats = entry.status === 'ok' ? entry.snapshot?.sessionStats : undefined
    if (stats !== undefined) counted.push(stats)
    else if (entry.status === 'ok')
      gaps.push({ id: entry.id, status: 'unavailable', problem: { message: 'the sessionStats unit gave no value' } })
    else gaps.push({ id: entry.id, status: entry.status, ...(entry.problem === undefined ? {} : { problem: entry.problem }) })
  }
  return { sessions: counted.length, totals: sumSessionStats(counted), gaps, complete: gaps.length === 0 }
}
