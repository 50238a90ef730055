import { priceOf } from './price-table.js'
import type { PriceTable } from './price-types.js'
import type { ModelUsage, SessionStats, TokenKind } from './stats-types.js'

/**
 * Why a cost is unknown. Never 0 in its place:
 * - `model-not-recorded`: calls whose provider or model the log does not name;
 * - `unknown-model`: the table has no price for that provider and model;
 * - `missing-price`: the model used a token kind (cacheRead, cacheWrite) the table does not price;
 * - `usage-not-recorded`: some calls reported no usage, so their tokens are unknown.
 */
export type CostUnavailableReason = 'model-not-recorded' | 'unknown-model' | 'missing-price' | 'usage-not-recorded'

const REASON_ORDER: readonly CostUnavailableReason[] = ['model-not-recorded', 'unknown-model', 'missing-price', 'usage-not-recorded']

export type ModelCost =
  | { readonly provider: string | null; readonly model: string | null; readonly usd: number }
  | {
      readonly provider: string | null
      readonly model: string | null
      readonly usd: null
      readonly reason: CostUnavailableReason
      /** With `missing-price`: the token kinds the table has no price for. */
      readonly kinds?: readonly TokenKind[]
    }

export type SessionCost =
  | { readonly usd: number; readonly byModel: readonly ModelCost[] }
  | {
      readonly usd: null
      /** The reason of the first unpriced model, most fundamental first (see `CostUnavailableReason`). */
      readonly reason: CostUnavailableReason
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
export function costOf(stats: Pick<SessionStats, 'byModel'>, table: PriceTable): SessionCost {
  const byModel = stats.byModel.map((usage) => modelCost(usage, table))
  let usd = 0
  let reason: CostUnavailableReason | undefined
  for (const cost of byModel) {
    if (cost.usd !== null) usd += cost.usd
    else if (reason === undefined || REASON_ORDER.indexOf(cost.reason) < REASON_ORDER.indexOf(reason)) reason = cost.reason
  }
  return reason === undefined ? { usd, byModel } : { usd: null, reason, byModel, pricedUsd: usd }
}
