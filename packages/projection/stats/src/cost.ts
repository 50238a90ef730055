import { priceOf } from './price-table.js'
import type { PriceTable } from './price-types.js'
import type { ModelUsage, SessionStats, TokenKind } from './stats-types.js'

/**
 * Why a model's cost is unknown. Never 0 in its place:
 * - `model-not-recorded`: calls whose provider or model the log does not name;
 * - `unknown-model`: the table has no price for that provider and model;
 * - `missing-price`: the model used a token kind (cacheRead, cacheWrite) the table does not price;
 * - `usage-not-recorded`: some calls have no usage, so their tokens are unknown: they reported none,
 *   or their step has not ended (a call still running, or one cut off by a crash).
 */
export type ModelCostUnavailableReason = 'model-not-recorded' | 'unknown-model' | 'missing-price' | 'usage-not-recorded'

/**
 * Why a total cost is unknown: a model's reason, or `incomplete`: a rollup
 * left sessions out (its `gaps`), so the tokens they used are not counted.
 */
export type CostUnavailableReason = ModelCostUnavailableReason | 'incomplete'

const REASON_ORDER: readonly ModelCostUnavailableReason[] = ['model-not-recorded', 'unknown-model', 'missing-price', 'usage-not-recorded']

export type ModelCost =
  | { readonly provider: string | null; readonly model: string | null; readonly usd: number }
  | {
      readonly provider: string | null
      readonly model: string | null
      readonly usd: null
      readonly reason: ModelCostUnavailableReason
      /** With `missing-price`: the token kinds the table has no price for. */
      readonly kinds?: readonly TokenKind[]
    }

/** A total cost; `R` narrows the reasons it can carry (`costOf` never answers `incomplete`). */
export type SessionCost<R extends CostUnavailableReason = CostUnavailableReason> =
  | { readonly usd: number; readonly byModel: readonly ModelCost[] }
  | {
      readonly usd: null
      /**
       * `incomplete` for a rollup with gaps, else the reason of the first
       * unpriced model, most fundamental first (see `ModelCostUnavailableReason`).
       */
      readonly reason: R
      readonly byModel: readonly ModelCost[]
      /** The sum over the models that could be priced: a lower bound, not the cost. */
      readonly pricedUsd: number
    }

const PER_TOKEN = 1 / 1_000_000

function modelCost(usage: ModelUsage, table: PriceTable): ModelCost {
  const { provider, model } = usage
  if (provider === null || model === null) return { provider, model, usd: null, reason: 'model-not-recorded' }
  const price = priceOf(table, provider, model)
  if (price === undefined) return { provider, model, usd: null, reason: 'unknown-model' }
  const rates: Record<TokenKind, number | undefined> = {
    input: price.input,
    output: price.output,
    cacheRead: price.cacheRead,
    cacheWrite: price.cacheWrite,
    reasoning: price.reasoning ?? price.output,
  }
  const missing = (Object.keys(rates) as TokenKind[]).filter((kind) => rates[kind] === undefined && usage.tokens[kind] > 0)
  if (missing.length > 0) return { provider, model, usd: null, reason: 'missing-price', kinds: missing }
  if (usage.callsWithoutUsage > 0) return { provider, model, usd: null, reason: 'usage-not-recorded' }
  let usd = 0
  for (const kind of Object.keys(rates) as TokenKind[]) usd += usage.tokens[kind] * (rates[kind] ?? 0) * PER_TOKEN
  return { provider, model, usd }
}

/**
 * The cost of a session's stats under `table`, computed now (prices are never
 * stored in a projection, so a new table re-prices every session). Any model
 * that cannot be priced makes the total `null` with a reason; a session with
 * no model calls costs 0.
 */
export function costOf(stats: Pick<SessionStats, 'byModel'>, table: PriceTable): SessionCost<ModelCostUnavailableReason> {
  const byModel = stats.byModel.map((usage) => modelCost(usage, table))
  let usd = 0
  let reason: ModelCostUnavailableReason | undefined
  for (const cost of byModel) {
    if (cost.usd !== null) usd += cost.usd
    else if (reason === undefined || REASON_ORDER.indexOf(cost.reason) < REASON_ORDER.indexOf(reason)) reason = cost.reason
  }
  return reason === undefined ? { usd, byModel } : { usd: null, reason, byModel, pricedUsd: usd }
}

/**
 * The cost of a rollup's totals: `costOf` them, and while the rollup is not
 * `complete` the total is unknown (`incomplete`), the priced sum only a lower
 * bound, since the sessions in its gaps used tokens nobody counted.
 */
export function costOfRollup(
  rollup: { readonly totals: Pick<SessionStats, 'byModel'>; readonly complete: boolean },
  table: PriceTable,
): SessionCost {
  const cost = costOf(rollup.totals, table)
  if (rollup.complete) return cost
  return { usd: null, reason: 'incomplete', byModel: cost.byModel, pricedUsd: cost.usd ?? cost.pricedUsd }
}
