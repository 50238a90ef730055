import { isDshError } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot } from '@dsh/session-projection'
import { DEFAULT_COLD_READ_CONCURRENCY } from './catalog-options.js'
import { mapBounded } from './concurrency.js'
import { SubagentError } from './errors.js'
import { cachedRung, type LadderDeps, observedRung } from './ladder.js'
import { type Candidate, type CorpusDeps, enumerateFamily, findSession } from './list-corpus.js'
import { ListingScope } from './list-scope.js'
import type { SubagentCatalogServices, SubagentListRung } from './list-types.js'

/**
 * Projection snapshots of a session and, when asked, of every session below
 * it, through the catalog's ladder: a live session's watermark snapshot
 * (rung 1, no log read), else the checkpoint cache at the cut its listing
 * record carries (rung 2, no log read), else one body-bearing observation
 * folded through the registered units (rung 3). With a warm cache a cold tree
 * costs no body read.
 *
 * The tree is every session whose parent chain leads to the root — subagents
 * and the ordinary sessions between them — found from headers only: the root
 * by one lookup of its row, then one listing per generation below it, so the
 * cost follows the tree, never the rest of the corpus. Units see each
 * session's fork cut, so a value computed from its own suffix never counts an
 * inherited prefix twice. A session whose value cannot be had is an entry
 * with status `unavailable` (the read failed; the next call retries) or
 * `corrupt` (its log is damaged, or the id now names another lifecycle) —
 * never left out.
 */

export type TreeSnapshotStatus = 'ok' | 'unavailable' | 'corrupt'

export interface TreeSnapshotEntry {
  readonly id: SessionId
  /** The session this one is a child of; `undefined` for the root. */
  readonly parentId: SessionId | undefined
  /** 0 for the root, 1 for its children, … */
  readonly depth: number
  /** The header says `origin: 'subagent'`. */
  readonly subagent: boolean
  /** Which rung answered (1 live, 2 cache, 3 one body read). */
  readonly rung: SubagentListRung
  readonly status: TreeSnapshotStatus
  /** The units' values; present exactly when `status` is `ok`. */
  readonly snapshot?: ProjectionSnapshot
  /** Why there is no snapshot: the failing read's code (when it has one) and message. */
  readonly problem?: { readonly code?: string; readonly message: string }
}

export interface TreeSnapshotOptions {
  /** Include every session below the root (default: the root alone). */
  readonly descendants?: boolean
  /**
   * With `descendants`: only the sessions at most this many generations
   * below the root (1: its children), and the tree is listed no deeper, so a
   * caller that shows one generation reads no more. A positive integer;
   * default the whole tree.
   */
  readonly maxDepth?: number
  readonly signal?: AbortSignal
}

const CORRUPT_READS = ['SESSION_QUERY_CORRUPT_SESSION', 'SESSION_PERSISTENCE_CORRUPT'] as const

/**
 * The root and (with `descendants`) its tree, depth-first in listing order,
 * at most `concurrency` sessions on the ladder at once. Fails with
 * `SUBAGENT_NOT_FOUND` when the root is neither live nor listed, with the
 * catalog's `SUBAGENT_CONTROL_*_UNAVAILABLE` codes (a key that is not a
 * registered unit is `SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE`), `CANCELLED`,
 * or the query's own error when the corpus cannot be listed.
 */
export async function treeSnapshotsWithin(
  services: SubagentCatalogServices,
  rootId: string,
  keys: readonly ProjectionKey[],
  options: TreeSnapshotOptions,
  concurrency: number,
): Promise<TreeSnapshotEntry[]> {
  const deps = requireServices(services, keys)
  const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY
  if (maxDepth !== Number.POSITIVE_INFINITY && !(Number.isSafeInteger(maxDepth) && maxDepth >= 1)) {
    throw new SubagentError('SUBAGENT_INVALID_OPTIONS', `maxDepth must be a positive integer, got ${String(options.maxDepth)}.`, {
      details: { maxDepth: options.maxDepth },
    })
  }
  return ListingScope.run(options.signal, async (scope) => {
    const id = rootId as SessionId
    const named = typeof rootId === 'string' && rootId.length > 0
    const live = named ? deps.sessions.get(id) : undefined
    const root: Candidate | undefined =
      live !== undefined
        ? { header: live.header, inheritedEventCount: live.inheritedEventCount, live }
        : named
          ? await findSession(deps, id, scope)
          : undefined
    if (root === undefined) {
      throw new SubagentError(
        'SUBAGENT_NOT_FOUND',
        `No session '${String(rootId)}' is live or listed; check the id (\`dsh sessions\` lists them).`,
        { details: { id: rootId } },
      )
    }
    const nodes: { readonly candidate: Candidate; readonly parentId: SessionId | undefined; readonly depth: number }[] = [
      { candidate: root, parentId: undefined, depth: 0 },
    ]
    if (options.descendants === true) {
      const tree = await enumerateFamily(deps, root.header.id, scope, maxDepth)
      // Guards against a parent/child cycle in damaged data (ids reused across lifecycles).
      const visited = new Set<string>([root.header.id])
      const walk = (parent: SessionId, depth: number): void => {
        if (depth > maxDepth) return
        for (const child of tree.get(parent) ?? []) {
          if (visited.has(child.header.id)) continue
          visited.add(child.header.id)
          nodes.push({ candidate: child, parentId: parent, depth })
          walk(child.header.id, depth + 1)
        }
      }
      walk(root.header.id, 1)
    }
    return mapBounded(nodes, concurrency, async ({ candidate, parentId, depth }) => {
      const base = { id: candidate.header.id, parentId, depth, subagent: candidate.header.origin === 'subagent' }
      return Object.freeze({ ...base, ...(await ladder(deps, candidate, keys, scope)) })
    })
  })
}

/** `treeSnapshotsWithin` at the default cold-read concurrency. */
export function treeSnapshots(
  services: SubagentCatalogServices,
  rootId: string,
  keys: readonly ProjectionKey[],
  options: TreeSnapshotOptions = {},
): Promise<TreeSnapshotEntry[]> {
  return treeSnapshotsWithin(services, rootId, keys, options, DEFAULT_COLD_READ_CONCURRENCY)
}

type Rungs = Pick<TreeSnapshotEntry, 'rung' | 'status' | 'snapshot' | 'problem'>

async function ladder(deps: LadderDeps, candidate: Candidate, keys: readonly ProjectionKey[], scope: ListingScope): Promise<Rungs> {
  if (candidate.live !== undefined) {
    try {
      return { rung: 1, status: 'ok', snapshot: deps.projections.snapshot(candidate.live, keys) }
    } catch (error) {
      return { rung: 1, status: 'unavailable', problem: problemOf(error) }
    }
  }
  const cached = cachedRung(deps, candidate, keys)
  if (cached !== undefined) return { rung: 2, status: 'ok', snapshot: cached }
  const observed = await observedRung(deps, candidate, keys, scope)
  if (observed.kind === 'snapshot') return { rung: 3, status: 'ok', snapshot: observed.snapshot }
  if (observed.kind === 'other-lifecycle') {
    return {
      rung: 3,
      status: 'corrupt',
      problem: { message: `Session '${candidate.header.id}' was replaced by another session with the same id while it was listed.` },
    }
  }
  const corrupt = CORRUPT_READS.some((code) => isDshError(observed.error, code))
  return { rung: 3, status: corrupt ? 'corrupt' : 'unavailable', problem: problemOf(observed.error) }
}

function problemOf(error: unknown): NonNullable<TreeSnapshotEntry['problem']> {
  const message = error instanceof Error ? error.message : String(error)
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? { code, message } : { message }
}

function requireServices(services: SubagentCatalogServices, keys: readonly ProjectionKey[]): LadderDeps & CorpusDeps {
  const projections = services.sessionProjections
  if (projections === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
      "Tree snapshots need the 'sessionProjections' service; activate the session-projection plugin first.",
    )
  }
  const registered = projections.keys()
  const missing = keys.filter((key) => !registered.includes(key))
  if (missing.length > 0) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
      `The projection unit(s) ${missing.map((key) => `'${key}'`).join(', ')} are not registered in 'sessionProjections'; register them before asking for their values.`,
      { details: { missing } },
    )
  }
  if (services.sessions === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE',
      "Tree snapshots need the 'sessions' store; activate sessionStorePlugin first.",
    )
  }
  if (services.sessionQuery === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_QUERY_UNAVAILABLE',
      "Tree snapshots need the 'sessionQuery' service to enumerate the session corpus; activate a session-query backend (memory, SQLite or PostgreSQL).",
    )
  }
  return { sessions: services.sessions, projections, query: services.sessionQuery, cache: services.sessionProjectionCache }
}
