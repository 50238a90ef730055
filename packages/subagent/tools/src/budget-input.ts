import { SUBAGENT_BUDGET_KEYS, type SubagentBudget, type SubagentSettings } from '@dsh/subagent'
import { z } from 'zod'

/** The `budget` of a `subagent` call: the runtime's budget settings, as a model may give them. */
export const subagentBudgetInputSchema = z
  .strictObject({
    maxTokens: z.int().positive().exactOptional().describe('Tokens of every kind its model calls (and its own subagents) may use.'),
    maxCostUsd: z.number().positive().exactOptional().describe('USD its model calls (and its own subagents) may cost, by the price table.'),
    maxWallMs: z.int().positive().exactOptional().describe('Milliseconds it may take from its start, idle time included.'),
    maxTurns: z.int().positive().exactOptional().describe('Turns it (and its own subagents) may run.'),
  })
  .describe(
    'Limits on what it may spend; when one is used up it stops and ends with status "budget". It can never get more than what is left of your own budget (a larger figure is lowered to that).',
  )

/**
 * The settings with `budget` applied: a figure the settings already have (an
 * agent definition's) is only ever lowered by the call, never raised.
 */
export function withBudget(settings: SubagentSettings, budget: SubagentBudget | undefined): SubagentSettings {
  if (budget === undefined) return settings
  const merged: Record<string, unknown> = { ...settings }
  for (const key of SUBAGENT_BUDGET_KEYS) {
    const asked = budget[key]
    if (asked === undefined) continue
    const had = settings[key]
    merged[key] = had === undefined ? asked : Math.min(had, asked)
  }
  return merged as SubagentSettings
}

/** The line a result shows of the budget a child runs under (after any lowering). */
export function budgetText(budget: SubagentBudget): string {
  const parts = SUBAGENT_BUDGET_KEYS.flatMap((key) => (budget[key] === undefined ? [] : [`${key} ${budget[key]}`]))
  return `Budget: ${parts.join(', ')}.`
}
