import type { SessionId, SessionStore } from '@dsh/session'
import type { SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import type { SessionQuery } from '@dsh/session-query'

/**
 * One row of a parent's subagent catalog: a child with its strong mode/label
 * contract (a continuable row always has a label), or a diagnostic.
 * `unsupported` is part of the type and the wire enum; the listing never
 * produces it (missing, corrupt and unknown-version descriptors are all
 * `corrupt`).
 */
export type SubagentListEntry =
  | ({
      readonly kind: 'child'
      readonly id: SessionId
      readonly activity: 'running' | 'inactive'
      readonly hasChildren: boolean
    } & ({ readonly mode: 'one-shot'; readonly label?: string } | { readonly mode: 'continuable'; readonly label: string }))
  | {
      readonly kind: 'diagnostic'
      readonly id: SessionId
      readonly reason: 'corrupt' | 'unsupported' | 'unavailable'
    }

/**
 * Which rung of the ladder decided a row: 1 = live watermark snapshot,
 * 2 = projection cache checkpoint, 3 = one body-bearing observation + fold.
 */
export type SubagentListRung = 1 | 2 | 3

/** A row plus where it came from (for the CLI and tests; the row itself is a plain `SubagentListEntry`). */
export interface ExplainedSubagentEntry {
  readonly row: SubagentListEntry
  readonly rung: SubagentListRung
  /** The session whose child this row is. */
  readonly parentId: SessionId
  /** 1 for a direct child of the listed session, 2 for a grandchild, … */
  readonly depth: number
  /** The child's own tokens, `null` when unknown (see `SubagentUsage` in `list-usage.ts`; always `null` on a diagnostic). */
  readonly tokens: number | null
  /** The time the child spent in its own settled turns, `null` when unknown. */
  readonly durationMs: number | null
  /** Epoch ms of the child's descriptor, `null` when unknown. */
  readonly startedAt: number | null
  /** Epoch ms of its latest turn start or end, `null` when unknown. */
  readonly endedAt: number | null
  /**
   * Whether the child has been closed (`close`: it takes no further input),
   * from the `subagentTiming` unit read beside its identity (no read of its
   * own); `null` when unknown (always on a diagnostic). Every entry a catalog
   * builds carries it; an entry built elsewhere without it is unknown.
   */
  readonly closed?: boolean | null
}

/**
 * What a listing needs. `sessions`, `sessionProjections` and `sessionQuery`
 * are required (an absent one fails the listing with its
 * `SUBAGENT_CONTROL_*_UNAVAILABLE` code before any read);
 * `sessionProjectionCache` is an optional acceleration, skipped when absent.
 */
export interface SubagentCatalogServices {
  readonly sessions: SessionStore | undefined
  readonly sessionProjections: SessionProjections | undefined
  readonly sessionQuery: SessionQuery | undefined
  readonly sessionProjectionCache?: SessionProjectionCache | undefined
}
