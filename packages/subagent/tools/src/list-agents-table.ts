import type { SessionId } from '@dsh/session'
import type { ExplainedSubagentEntry, SubagentListEntry } from '@dsh/subagent'

/**
 * A child's status: live (`running`), a settled continuable (`idle`), a
 * settled one-shot (`ready`), or a continuable closed for good (`closed`).
 * The default format's `idle` and `ready` say where a continuable child is
 * kept instead (see `residencyOf` in `list-agents.ts`).
 */
export type ListAgentsStatus = 'running' | 'idle' | 'ready' | 'closed'

/** One row of the table: every child, one-shot included, with its mode, tree position and queue. */
export type ListAgentsRow =
  | {
      readonly kind: 'child'
      readonly id: SessionId
      readonly status: ListAgentsStatus
      readonly mode: 'one-shot' | 'continuable'
      readonly label?: string
      readonly hasChildren: boolean
      readonly parentId: SessionId
      readonly depth: number
      /**
       * Every token of its own model calls, with `usage` only (`dsh agents`; the
       * model's table leaves usage out); `null` unknown (not cached: a listing
       * never reads a log for it).
       */
      readonly tokens?: number | null
      /** The time it spent in its own settled turns, with `usage` only; `null` unknown. */
      readonly durationMs?: number | null
      /** USD of its own model calls under a price table (`dsh agents --prices`, MCP `list_agents` on a priced server); `null` unknown (not read, or a model without a price). */
      readonly cost?: number | null
      /**
       * Why `cost` is null, when the pricing said (`@dsh/session-stats`'
       * `ListingCostReason`: `unknown-model`, `usage-not-recorded`,
       * `stats-unavailable`, …); present only beside a null cost.
       */
      readonly costReason?: string
      /** Messages queued for it behind its running turn (present only when > 0). */
      readonly queued?: number
    }
  | {
      readonly kind: 'diagnostic'
      readonly id: SessionId
      readonly reason: 'corrupt' | 'unsupported' | 'unavailable'
      readonly parentId: SessionId
      readonly depth: number
    }

/** What the `table` format of `list_agents` resolves. */
export interface ListAgentsTableResult {
  readonly text: string
  readonly rows: readonly ListAgentsRow[]
}

/**
 * The table's status: a closed child is `closed` (it takes no further
 * message; `closed` is the catalog entry's own, read beside its row); else a
 * live child is `running`; a settled continuable one is `idle` (its parent
 * may resume it); a settled one-shot is `ready` (it has finished and its
 * result can be read).
 */
export function statusOf(row: Extract<SubagentListEntry, { kind: 'child' }>, closed = false): ListAgentsStatus {
  if (closed) return 'closed'
  if (row.activity === 'running') return 'running'
  return row.mode === 'continuable' ? 'idle' : 'ready'
}

/**
 * A catalog entry as a table row; `usage` copies its tokens and duration
 * (`dsh agents` shows them, the model's table does not). An entry priced
 * under a price table carries its `cost` (and, when null, its `costReason`)
 * into the row.
 */
export function toListAgentsRow(
  entry: ExplainedSubagentEntry & { readonly cost?: number | null; readonly costReason?: string | undefined },
  queued = 0,
  usage = false,
): ListAgentsRow {
  const { row, parentId, depth, tokens, durationMs } = entry
  if (row.kind === 'diagnostic') return Object.freeze({ kind: 'diagnostic', id: row.id, reason: row.reason, parentId, depth })
  return Object.freeze({
    kind: 'child',
    id: row.id,
    status: statusOf(row, entry.closed === true),
    mode: row.mode,
    ...(row.label === undefined ? {} : { label: row.label }),
    hasChildren: row.hasChildren,
    parentId,
    depth,
    ...(usage ? { tokens, durationMs } : {}),
    ...(entry.cost === undefined ? {} : { cost: entry.cost }),
    ...(entry.cost === null && entry.costReason !== undefined ? { costReason: entry.costReason } : {}),
    ...(queued > 0 ? { queued } : {}),
  })
}

const DIAGNOSTIC_TEXT: Record<'corrupt' | 'unsupported' | 'unavailable', string> = {
  corrupt: 'corrupt (its record is damaged; it cannot be resumed)',
  unsupported: 'unsupported (written by a newer version)',
  unavailable: 'unavailable (could not be read just now; list again to retry)',
}

/** A priced row's cost: `$<usd>`, or `$–` with the reason it is unknown. */
function costText(cost: number | null, reason: string | undefined): string {
  if (cost !== null) return `$${cost.toFixed(6)}`
  return reason === undefined ? '$–' : `$– (${reason})`
}

/**
 * The table (what `dsh agents` prints): one line per row, indented two spaces
 * per level below the caller, `<id>  <status>  <mode>  <label>[  <n> tokens][
 * <s>s][  $<usd> | $– (<reason>)][  +subagents]` or `<id>  diagnostic: <reason>`;
 * `(no subagents)` when empty. Tokens and duration appear for rows that carry
 * them (`usage`) and are left out when unknown. Cost appears for rows priced
 * under a price table; an unknown cost shows `$–` with its reason, never
 * blank, so a row that could not be priced is told from one not priced at all.
 */
export function renderListAgents(rows: readonly ListAgentsRow[]): string {
  if (rows.length === 0) return '(no subagents)'
  return rows
    .map((row) => {
      const indent = '  '.repeat(Math.max(0, row.depth - 1))
      if (row.kind === 'diagnostic') return `${indent}${row.id}  diagnostic: ${DIAGNOSTIC_TEXT[row.reason]}`
      const label = row.label === undefined ? '(no label)' : JSON.stringify(row.label)
      const status = row.queued === undefined ? row.status : `${row.status} (${row.queued} queued)`
      const tokens = row.tokens === undefined || row.tokens === null ? '' : `  ${row.tokens} tokens`
      const duration = row.durationMs === undefined || row.durationMs === null ? '' : `  ${(row.durationMs / 1000).toFixed(1)}s`
      const cost = row.cost === undefined ? '' : `  ${costText(row.cost, row.costReason)}`
      return `${indent}${row.id}  ${status}  ${row.mode}  ${label}${tokens}${duration}${cost}${row.hasChildren ? '  +subagents' : ''}`
    })
    .join('\n')
}
