import { z } from 'zod'

/** Why a model's cost is unknown (never 0 in its place). */
const modelReasons = ['model-not-recorded', 'unknown-model', 'missing-price', 'usage-not-recorded'] as const

/** Why a cost is unknown: a model's reason, or `incomplete` (a rollup with gaps: the priced part is a lower bound). */
export const costUnavailableReason = z.enum([...modelReasons, 'incomplete'])

/**
 * Why a listed session's or catalog row's `cost` is `null`: a model's reason,
 * `no-price-table` (the reader priced nothing) or `stats-unavailable` (no
 * usage is cached for the session yet; a later fold fills it).
 */
export const listingCostReason = z.enum([...modelReasons, 'no-price-table', 'stats-unavailable'])
