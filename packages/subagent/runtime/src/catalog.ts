import type { ProjectionKey } from '@dsh/session-projection'
import { coldReadConcurrencyOf, type SubagentCatalogOptions } from './catalog-options.js'
import { explainChildrenWithin, explainDescendantsWithin } from './list-children.js'
import type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry } from './list-types.js'
import { type TreeSnapshotEntry, type TreeSnapshotOptions, treeSnapshotsWithin } from './tree-snapshots.js'

/**
 * A configured catalog: the listing functions with a validated
 * `coldReadConcurrency`, over services looked up per listing (so a service
 * activated later, or never, is seen as it is when a listing starts). The
 * options are checked here, once (`SUBAGENT_INVALID_OPTIONS`); a listing
 * itself fails only with the listing's own codes.
 */
export class SubagentCatalog {
  readonly #services: () => SubagentCatalogServices
  readonly #concurrency: number

  constructor(services: SubagentCatalogServices | (() => SubagentCatalogServices), options?: SubagentCatalogOptions) {
    this.#concurrency = coldReadConcurrencyOf(options)
    this.#services = typeof services === 'function' ? services : () => services
  }

  /** The per-child tasks a listing runs at once. */
  get coldReadConcurrency(): number {
    return this.#concurrency
  }

  async listChildren(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return (await this.explainChildren(parentId, signal)).map((entry) => entry.row)
  }

  async listDescendants(parentId: string, signal?: AbortSignal): Promise<SubagentListEntry[]> {
    return (await this.explainDescendants(parentId, signal)).map((entry) => entry.row)
  }

  /** `listChildren` plus the rung that decided each row. */
  explainChildren(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return explainChildrenWithin(this.#services(), parentId, signal, this.#concurrency)
  }

  /** `listDescendants` plus rung, parent and depth per row. */
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<ExplainedSubagentEntry[]> {
    return explainDescendantsWithin(this.#services(), parentId, signal, this.#concurrency)
  }

  /** Projection values of a session (and with `descendants`, of its whole tree) through the same ladder (see `tree-snapshots.ts`). */
  treeSnapshots(rootId: string, keys: readonly ProjectionKey[], options: TreeSnapshotOptions = {}): Promise<TreeSnapshotEntry[]> {
    return treeSnapshotsWithin(this.#services(), rootId, keys, options, this.#concurrency)
  }
}
