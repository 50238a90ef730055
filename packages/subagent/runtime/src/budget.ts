/**
 * What a child may spend. Every field is optional; a child without one of
 * its own still spends from the budgets of its budgeted ancestors.
 *
 * - `maxTokens`: tokens of every kind (input, output, cache reads and
 *   writes, reasoning) summed over the `step/end` usage of the child and its
 *   descendants;
 * - `maxCostUsd`: those steps priced by the runtime's `pricing` (the price
 *   table of `@dsh/session-stats`), in USD; a step whose model the table
 *   does not price ends the child (the budget fails closed);
 * - `maxWallMs`: milliseconds of the runtime's clock since the child was
 *   spawned, idle time included;
 * - `maxTurns`: turns the child and its descendants run (the `maxTurns`
 *   setting a child already had, enforced).
 *
 * Agent definitions carry these four names in their frontmatter; `spawn`
 * takes them among the child's settings, and they are recorded in its
 * `subagent/options` event, never in its descriptor.
 */
export type SubagentBudget = {
  readonly maxTokens?: number
  readonly maxCostUsd?: number
  readonly maxWallMs?: number
  readonly maxTurns?: number
}

/** One model call to price: its provider and model (as its `step/start` names them) and its disjoint token counts. */
export type SubagentPricedStep = {
  readonly provider: string | null
  readonly model: string | null
  readonly tokens: {
    readonly input: number
    readonly output: number
    readonly cacheRead: number
    readonly cacheWrite: number
    readonly reasoning: number
  }
}

/**
 * Prices one model call in USD, or says why it cannot (a reason, never 0 in
 * its place). A host builds it from the price table of `@dsh/session-stats`:
 * `(step) => costOf({ byModel: [{ ...step, calls: 1, callsWithoutUsage: 0 }] }, table)`
 * fits as it is.
 */
export type SubagentStepPricer = (
  step: SubagentPricedStep,
) => { readonly usd: number; readonly reason?: undefined } | { readonly usd: null; readonly reason: string }

/** The budget fields, in the order they are checked and reported. */
export const SUBAGENT_BUDGET_KEYS = ['maxTokens', 'maxCostUsd', 'maxWallMs', 'maxTurns'] as const

/** Which budget a child crossed. */
export type SubagentBudgetKind = 'tokens' | 'cost' | 'wall' | 'turns'

export const SUBAGENT_BUDGET_KIND_OF: Readonly<Record<(typeof SUBAGENT_BUDGET_KEYS)[number], SubagentBudgetKind>> = Object.freeze({
  maxTokens: 'tokens',
  maxCostUsd: 'cost',
  maxWallMs: 'wall',
  maxTurns: 'turns',
})

/** What a budgeted child (with its descendants) has spent. `costUsd` is `null` once a step could not be priced. */
export type SubagentBudgetSpent = {
  readonly tokens: number
  readonly costUsd: number | null
  readonly turns: number
  readonly wallMs: number
}

/**
 * Why a run ended `budget`: which budget, whose it is, its limit and the
 * figure that crossed it. `session` is the child itself or the ancestor
 * whose budget it shared (siblings spending one parent's budget all end
 * with the parent's figures). `unpriced` says a cost budget failed closed:
 * the step's model has no price (`unknown-model`, `model-not-recorded`,
 * `missing-price`, as `@dsh/session-stats` names them).
 */
export type SubagentBudgetExceeded = {
  readonly kind: SubagentBudgetKind
  readonly session: string
  readonly limit: number
  readonly spent: number
  readonly unpriced?: string
}

/** The budget fields of `settings`, without the rest. */
export function budgetOf(settings: SubagentBudget): SubagentBudget {
  const budget: Record<string, number> = {}
  for (const key of SUBAGENT_BUDGET_KEYS) if (settings[key] !== undefined) budget[key] = settings[key]
  return budget as SubagentBudget
}
