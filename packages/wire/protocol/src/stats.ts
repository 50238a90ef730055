import { z } from 'zod'
import { costUnavailableReason } from './cost-reasons.js'
import { choiceParam, sessionId } from './primitives.js'
import { subagentListRung } from './subagents.js'

const count = z.number().int().nonnegative()
const ms = z.number().nonnegative()
const usd = z.number().nonnegative()

/** Token counts by kind, disjoint: `input` excludes cached prompt tokens, `output` excludes reasoning tokens. */
export const tokenCounts = z.object({ input: count, output: count, cacheRead: count, cacheWrite: count, reasoning: count })

const problem = z.object({ code: z.string().optional(), message: z.string() })

/** `sessionStats` summed over sessions: turns, steps, wall times (ms), first-token latency, tokens by kind, models, tools, skipped inputs. */
export const sessionStatsTotals = z.object({
  turns: count,
  steps: count,
  turnMs: ms,
  modelMs: ms,
  toolMs: ms,
  firstToken: z.object({ count, totalMs: ms, meanMs: ms.nullable() }),
  tokens: tokenCounts,
  byModel: z.array(
    z.object({
      provider: z.string().nullable(),
      model: z.string().nullable(),
      calls: count,
      callsWithoutUsage: count,
      tokens: tokenCounts,
    }),
  ),
  tools: z.array(z.object({ name: z.string(), calls: count, errors: count, ms })),
  toolCalls: count,
  toolErrors: count,
  compactions: count,
  skipped: z.record(z.string(), count),
})

const modelCost = z.object({
  provider: z.string().nullable(),
  model: z.string().nullable(),
  usd: usd.nullable(),
  reason: costUnavailableReason.optional(),
  kinds: z.array(z.enum(['input', 'output', 'cacheRead', 'cacheWrite', 'reasoning'])).optional(),
})

/** A cost in USD, or `usd: null` with the reason and the priced part (a lower bound). */
export const sessionCost = z.object({
  usd: usd.nullable(),
  reason: costUnavailableReason.optional(),
  byModel: z.array(modelCost),
  pricedUsd: usd.optional(),
})

export const statsScope = z.enum(['session', 'descendants'])

/** One session of a stats report: where it sits in the tree, the ladder rung that read it, its title, own tokens and turn time. */
export const sessionStatsEntry = z.object({
  id: sessionId,
  parentId: sessionId.nullable(),
  depth: count,
  subagent: z.boolean(),
  rung: subagentListRung,
  status: z.enum(['ok', 'unavailable', 'corrupt']),
  title: z.string().nullable(),
  tokens: count.nullable(),
  turnMs: ms.nullable(),
  problem: problem.optional(),
})

/**
 * Usage of a session, or summed over its tree (`scope: 'descendants'`).
 * `rollup.gaps` lists every session that could not be counted (the totals
 * are then a lower bound); `cost` is `null` with `costReason` when no price
 * table is configured.
 */
export const sessionStatsReport = z.object({
  id: sessionId,
  scope: statsScope,
  title: z.string().nullable(),
  sessions: z.array(sessionStatsEntry),
  rollup: z.object({
    sessions: count,
    totals: sessionStatsTotals,
    gaps: z.array(z.object({ id: sessionId, status: z.enum(['unavailable', 'corrupt']), problem: problem.optional() })),
    complete: z.boolean(),
  }),
  cost: sessionCost.nullable(),
  costReason: z.literal('no-price-table').optional(),
})

/** Query parameters of `GET /api/sessions/:id/stats`. */
export const statsQuery = z.object({
  scope: choiceParam(['session', 'descendants']).optional(),
})
