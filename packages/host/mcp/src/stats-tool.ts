import { idParam, statsScope } from '@dsh/protocol'
import { catalogListingCosts, type ListingCost, type PriceTable, type ReportInput, reportSessionStats } from '@dsh/session-stats'
import { z } from 'zod'
import { McpError } from './errors.js'

const KEYS = ['sessionStats', 'sessionTitle'] as const

export const sessionStatsInput = z.strictObject({
  id: idParam.describe('The session whose usage to report.'),
  scope: statsScope.optional().describe("'session' (default): the session alone; 'descendants': summed over every session below it."),
})

/** What the tool reads: the subagent runtime's `treeSnapshots` (the catalog's ladder). */
export interface TreeSnapshotSource {
  treeSnapshots(
    rootId: string,
    keys: readonly (typeof KEYS)[number][],
    options: { readonly descendants?: boolean; readonly maxDepth?: number; readonly signal?: AbortSignal },
  ): Promise<readonly ReportInput[]>
}

function hasTrees(catalog: unknown): catalog is TreeSnapshotSource {
  return typeof (catalog as Partial<TreeSnapshotSource> | undefined)?.treeSnapshots === 'function'
}

/** The tool's description: whether cost is priced depends on the server's price table. */
export function sessionStatsDescription(priced: boolean): string {
  return `Usage of a session: turns, steps, model/tool/turn wall time, first-token latency, tokens by kind (input, output, cacheRead, cacheWrite, reasoning), tool calls by name and errors. scope 'descendants' sums over its whole subagent tree; sessions that could not be read are listed as gaps. ${
    priced
      ? "cost is in USD under the server's price table; a model without a price makes it unknown (usd null, with the reason), never 0."
      : 'No price table is configured here, so cost is null.'
  }`
}

/**
 * `session_stats`: the report `GET /api/sessions/:id/stats` answers, read
 * through the catalog's ladder (live, checkpoint cache, one body read).
 */
export async function callSessionStats(
  catalog: unknown,
  input: z.output<typeof sessionStatsInput>,
  signal: AbortSignal,
  prices: PriceTable | undefined,
) {
  const trees = treesOf(catalog)
  const scope = input.scope ?? 'session'
  const entries = await trees.treeSnapshots(input.id, KEYS, { descendants: scope === 'descendants', signal })
  return reportSessionStats(input.id, scope, entries, prices)
}

/** The cost of each `list_agents` row of `scope` on a priced server, with the reason beside a null (`catalogListingCosts`: the tree read no deeper than the rows go). */
export function callTreeCosts(
  catalog: unknown,
  rootId: string,
  scope: 'children' | 'descendants',
  signal: AbortSignal,
  prices: PriceTable,
): Promise<Map<string, ListingCost>> {
  return catalogListingCosts(treesOf(catalog), rootId, scope, prices, signal)
}

function treesOf(catalog: unknown): TreeSnapshotSource {
  if (hasTrees(catalog)) return catalog
  throw new McpError(
    'MCP_SERVICE_UNAVAILABLE',
    "This server's host cannot read session trees (its 'subagents' service has no treeSnapshots).",
  )
}
