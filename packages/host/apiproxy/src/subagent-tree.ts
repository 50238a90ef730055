import type { SubagentListRowBody } from './schemas.js'
import type { SubagentCatalog } from './services.js'
import { wireSubagentRow } from './wire.js'

/**
 * The rows of `parentId`'s catalog with their place in the tree: direct
 * children, or the whole subtree in pre-order (each child directly followed
 * by its own subtree), exactly as the subagent runtime lists them.
 */
export async function listSubagentRows(catalog: SubagentCatalog, parentId: string, scope: 'children' | 'descendants', signal: AbortSignal): Promise<SubagentListRowBody[]> {
  const rows = scope === 'children' ? await catalog.explainChildren(parentId, signal) : await catalog.explainDescendants(parentId, signal)
  return rows.map(wireSubagentRow)
}
