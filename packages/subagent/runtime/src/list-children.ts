import type { Session, SessionId } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot, SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import { DEFAULT_COLD_READ_CONCURRENCY } from './catalog-options.js'
import { mapBounded } from './concurrency.js'
import { SUBAGENT_DESCRIPTOR_EVENT } from './descriptor.js'
import { SubagentError } from './errors.js'
import { cachedRung, observedRung } from './ladder.js'
import { type Candidate, type CorpusDeps, enumerateChildren, enumerateChildrenOf, enumerateFamily, isSubagent } from './list-corpus.js'
import { ListingScope } from './list-scope.js'
import type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry, SubagentListRung } from './list-types.js'
import { type SubagentUsage, UNKNOWN_USAGE, usageKeys, usageOf } from './list-usage.js'
import { SUBAGENT_IDENTITY_KEY } from './projection.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/**
 * A parent's subagent catalog.
 *
 * Invariants:
 * - The `subagent` projection unit is the only interpreter of descriptors:
 *   every row's mode and label is that unit's value, computed on read and
 *   discarded. The listing parses no event, keeps no cache or memo and writes
 *   nothing back.
 * - Enumeration needs header facts only (see `list-corpus.ts`); values come
 *   down a three-rung ladder, one rung at a time:
 *   1. a live child: the registry's watermark snapshot, zero log reads;
 *   2. a cold child: the optional checkpoint cache at the exact cut its
 *      listing record carries (seeded children included); any fault, miss,
 *      `null` or failed seq gate falls through;
 *   3. one body-bearing observation folded through the registered unit.
 *   An identity counts only if its descriptor lies in the child's own suffix.
 * - Four states map a ladder result to a row: an own identity is a `child`
 *   row; none and inactive is `corrupt`; none and running is no row while no
 *   own descriptor event exists yet (the creation window) and `corrupt` once
 *   one does (it folded to nothing: poisoned, wherever it sits); a failed cold
 *   read is `unavailable`, for that child only.
 * - Errors are the design's set: `SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE`,
 *   `SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE`,
 *   `SUBAGENT_CONTROL_QUERY_UNAVAILABLE` (checked before any read, so a
 *   parent with no children fails too), `CANCELLED`, and the query's own
 *   error, unchanged, when the corpus fails. An empty or unknown parent id
 *   lists as an empty catalog.
 */

const KEYS = [SUBAGENT_IDENTITY_KEY] as const

interface CatalogDeps extends CorpusDeps {
  readonly projections: SessionProjections
  readonly cache: SessionProjectionCache | undefined
  readonly concurrency: number
  /** The registered usage units (`list-usage.ts`), read beside the identity. */
  readonly usageKeys: readonly ProjectionKey[]
  /** The identity's key followed by the usage units': a cache lookup of all of them at once. */
  readonly identityAndUsageKeys: readonly ProjectionKey[]
}

interface Classified extends Ladder {
  readonly id: SessionId
}

/**
 * A parent's direct subagent children, with the rung that decided each row,
 * classifying at most `concurrency` children at once (a validated
 * `coldReadConcurrency`: see `SubagentCatalog`).
 */
export async function explainChildrenWithin(
  services: SubagentCatalogServices,
  parentId: string,
  signal: AbortSignal | undefined,
  concurrency: number,
): Promise<ExplainedSubagentEntry[]> {
  const deps = requireServices(services, concurrency)
  return ListingScope.run(signal, async (scope) => {
    const parent = parentIdOf(parentId)
    if (parent === undefined) return []
    const candidates = await enumerateChildren(deps, parent, scope)
    if (candidates.length === 0) return []
    // `hasChildren` for every row from one listing of the children's own children: the family, never the corpus.
    const grandchildren = await enumerateChildrenOf(
      deps,
      candidates.map((c) => c.header.id),
      'subagent',
      scope,
    )
    const hasChildren = (id: SessionId): boolean => grandchildren.has(id)
    const classified = await classifyAll(deps, candidates, hasChildren, scope)
    return classified.flatMap((child) => (child.row === undefined ? [] : [entryOf(child, child.row, parent, 1)]))
  })
}

/**
 * Every subagent below `parentId`, depth-first in listing order: each child's
 * row is followed by its own subtree before its next sibling. Children whose
 * row is omitted (creation window) or a diagnostic are still descended into,
 * and so are ordinary (non-subagent) sessions between them — a plain fork of
 * the parent that spawned subagents of its own — which get no row: their
 * subagents list with `parentId` the ordinary session and `depth` counting
 * every link from `parentId`. The tree comes from header-only listings of
 * the family, one per generation (live headers preferred): its cost follows
 * the subtree, not the corpus, a deep tree costs one query per level, not
 * one per node, and no body is read beyond the ladder's.
 */
export async function explainDescendantsWithin(
  services: SubagentCatalogServices,
  parentId: string,
  signal: AbortSignal | undefined,
  concurrency: number,
): Promise<ExplainedSubagentEntry[]> {
  const deps = requireServices(services, concurrency)
  return ListingScope.run(signal, async (scope) => {
    const root = parentIdOf(parentId)
    if (root === undefined) return []
    const tree = await enumerateFamily(deps, root, scope)
    const hasSubagentChildren = (id: SessionId): boolean => (tree.get(id) ?? []).some(isSubagent)
    const out: ExplainedSubagentEntry[] = []
    // Guards against a parent/child cycle in damaged data (ids reused across lifecycles).
    const visited = new Set<string>([root])
    const walk = async (parent: SessionId, depth: number): Promise<void> => {
      const candidates = (tree.get(parent) ?? []).filter((c) => !visited.has(c.header.id))
      for (const candidate of candidates) visited.add(candidate.header.id)
      const classified = await classifyAll(deps, candidates.filter(isSubagent), hasSubagentChildren, scope)
      const rows = new Map(classified.map((child) => [child.id as string, child]))
      for (const candidate of candidates) {
        const child = rows.get(candidate.header.id)
        if (child?.row !== undefined) out.push(entryOf(child, child.row, parent, depth))
        if (tree.has(candidate.header.id)) await walk(candidate.header.id, depth + 1)
      }
    }
    await walk(root, 1)
    return out
  })
}

/** A parent's direct subagent children with their rungs, at the default cold-read concurrency. */
export function explainChildren(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<ExplainedSubagentEntry[]> {
  return explainChildrenWithin(services, parentId, signal, DEFAULT_COLD_READ_CONCURRENCY)
}

/** The whole subtree with rungs, parents and depths, at the default cold-read concurrency. */
export function explainDescendants(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<ExplainedSubagentEntry[]> {
  return explainDescendantsWithin(services, parentId, signal, DEFAULT_COLD_READ_CONCURRENCY)
}

/** `listChildren`: rows only. */
export async function listChildren(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<SubagentListEntry[]> {
  return (await explainChildren(services, parentId, signal)).map((entry) => entry.row)
}

/** Rows of the whole subtree, depth-first in listing order (see `explainDescendantsWithin`). */
export async function listDescendants(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<SubagentListEntry[]> {
  return (await explainDescendants(services, parentId, signal)).map((entry) => entry.row)
}

// Checked up front, before any read, so a missing service fails with its code
// even when the parent has no children at all.
function requireServices(services: SubagentCatalogServices, concurrency: number): CatalogDeps {
  const projections = services.sessionProjections
  if (projections === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
      "Listing subagents needs the 'sessionProjections' service; activate the session-projection plugin before the subagents plugin.",
    )
  }
  if (!projections.keys().includes(SUBAGENT_IDENTITY_KEY)) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE',
      "The 'subagent' projection unit is not registered in 'sessionProjections'; activate subagentsPlugin (or call registerSubagentUnits) first.",
    )
  }
  if (services.sessions === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE',
      "Listing subagents needs the 'sessions' store; activate sessionStorePlugin first.",
    )
  }
  if (services.sessionQuery === undefined) {
    throw new SubagentError(
      'SUBAGENT_CONTROL_QUERY_UNAVAILABLE',
      "Listing subagents needs the 'sessionQuery' service to enumerate the session corpus; activate a session-query backend (memory, SQLite or PostgreSQL).",
    )
  }
  const usage = usageKeys(projections)
  return {
    sessions: services.sessions,
    projections,
    query: services.sessionQuery,
    cache: services.sessionProjectionCache,
    concurrency,
    usageKeys: usage,
    identityAndUsageKeys: [...KEYS, ...usage],
  }
}

function entryOf(ladder: Ladder, row: SubagentListEntry, parentId: SessionId, depth: number): ExplainedSubagentEntry {
  const { tokens, durationMs, startedAt, endedAt, closed } = ladder.usage
  return Object.freeze({ row, rung: ladder.rung, parentId, depth, tokens, durationMs, startedAt, endedAt, closed })
}

/** A parent id to enumerate under, or `undefined` for one no session can have (it lists as empty). */
function parentIdOf(id: unknown): SessionId | undefined {
  return typeof id === 'string' && id.length > 0 ? (id as SessionId) : undefined
}

/**
 * Each candidate's ladder, in input order. Rungs 1 and 2 are synchronous (a
 * registry snapshot, a checkpoint-cache lookup), so they run in one plain
 * pass; only the children neither decides go on to rung 3, at most
 * `concurrency` observations at once. Every child still climbs one rung at a
 * time: rung 3 is read only for a child whose rung 2 fell through.
 */
async function classifyAll(
  deps: CatalogDeps,
  candidates: readonly Candidate[],
  hasChildrenOf: (id: SessionId) => boolean,
  scope: ListingScope,
): Promise<Classified[]> {
  const out = new Array<Classified>(candidates.length)
  const cold: number[] = []
  candidates.forEach((candidate, index) => {
    const ladder = classifyInMemory(deps, candidate, hasChildrenOf(candidate.header.id))
    if (ladder === undefined) cold.push(index)
    else out[index] = { id: candidate.header.id, ...ladder }
  })
  await mapBounded(cold, deps.concurrency, async (index) => {
    const candidate = candidates[index]!
    out[index] = { id: candidate.header.id, ...(await observationRung(deps, candidate, hasChildrenOf(candidate.header.id), scope)) }
  })
  return out
}

type Ladder = { readonly row: SubagentListEntry | undefined; readonly rung: SubagentListRung; readonly usage: SubagentUsage }

/** Rungs 1 and 2 for one child: the ladder when one of them decides the row, `undefined` when rung 3 must. */
function classifyInMemory(deps: CatalogDeps, candidate: Candidate, hasChildren: boolean): Ladder | undefined {
  if (candidate.live !== undefined) return liveRung(deps, candidate.live, hasChildren)
  return cacheRung(deps, candidate, hasChildren)
}

/**
 * Rung 1, a live child: the registry's watermark snapshot (zero log reads).
 * Without an own identity it is running with no value: still in the creation
 * window while none of its own events is a descriptor, poisoned (corrupt)
 * once one is — wherever it sits, since a child may write its descriptor
 * inside its first turn. Only event types are looked at, in memory; the unit
 * alone reads payloads.
 */
function liveRung(deps: CatalogDeps, live: Session, hasChildren: boolean): Ladder {
  const identity = ownIdentity(deps.projections.snapshot(live, KEYS), (seq) => live.isOwnSeq(seq))
  if (identity !== undefined) {
    const usage = deps.usageKeys.length === 0 ? UNKNOWN_USAGE : usageOf(deps.projections.snapshot(live, deps.usageKeys))
    return { row: childRow(live.id, 'running', hasChildren, identity), rung: 1, usage }
  }
  return { row: hasOwnDescriptorEvent(live) ? diagnostic(live.id, 'corrupt') : undefined, rung: 1, usage: UNKNOWN_USAGE }
}

function hasOwnDescriptorEvent(session: Session): boolean {
  for (let seq = session.inheritedEventCount; seq < session.seq; seq++) {
    if (session.eventAt(seq)?.type === SUBAGENT_DESCRIPTOR_EVENT) return true
  }
  return false
}

/**
 * Rung 2, a cold child with the optional checkpoint cache: the snapshot at the
 * exact cut the listing record carries, accepted only with an own identity.
 * Everything else — no cache, a miss, `null`, a failed gate, a throw (a
 * poisoned row) — falls through: the cache is derived data and never decides
 * a diagnostic. The identity and the usage units are one lookup when all
 * their rows are there; otherwise the identity is looked up alone and each
 * usage unit on its own, so a miss on one leaves only that value unknown.
 */
function cacheRung(deps: CatalogDeps, candidate: Candidate, hasChildren: boolean): Ladder | undefined {
  const cut = candidate.inheritedEventCount
  const isOwn = (seq: number): boolean => seq >= cut
  const whole = deps.usageKeys.length === 0 ? undefined : cachedRung(deps, candidate, deps.identityAndUsageKeys)
  if (whole !== undefined) {
    const identity = ownIdentity(whole, isOwn)
    return identity === undefined
      ? undefined
      : { row: childRow(candidate.header.id, 'inactive', hasChildren, identity), rung: 2, usage: usageOf(whole) }
  }
  const identity = ownIdentity(cachedRung(deps, candidate, KEYS), isOwn)
  if (identity === undefined) return undefined
  const views: Record<string, unknown> = {}
  for (const key of deps.usageKeys) Object.assign(views, cachedRung(deps, candidate, [key]))
  return { row: childRow(candidate.header.id, 'inactive', hasChildren, identity), rung: 2, usage: usageOf(views as ProjectionSnapshot) }
}

/**
 * Rung 3: one body-bearing observation folded through the registered unit,
 * gated by the observed cut. A failed read is an `unavailable` row (the next
 * listing retries); an observation of another lifecycle under the same id
 * (the witness fields differ) is `corrupt` and leaks nothing of it; no own
 * identity is `corrupt`.
 */
async function observationRung(deps: CatalogDeps, candidate: Candidate, hasChildren: boolean, scope: ListingScope): Promise<Ladder> {
  const id = candidate.header.id
  const observed = await observedRung(deps, candidate, [...KEYS, ...deps.usageKeys], scope)
  if (observed.kind === 'failed') return { row: diagnostic(id, 'unavailable'), rung: 3, usage: UNKNOWN_USAGE }
  if (observed.kind === 'other-lifecycle') return { row: diagnostic(id, 'corrupt'), rung: 3, usage: UNKNOWN_USAGE }
  const { snapshot, cut, count } = observed
  const identity = ownIdentity(snapshot, (seq) => seq >= cut && seq < count)
  if (identity === undefined) return { row: diagnostic(id, 'corrupt'), rung: 3, usage: UNKNOWN_USAGE }
  // The usage units fold from the same read: no read of their own.
  return { row: childRow(id, 'inactive', hasChildren, identity), rung: 3, usage: usageOf(snapshot) }
}

/** The non-null identity of a snapshot when its descriptor seq passes the own-suffix gate. */
function ownIdentity(snapshot: ProjectionSnapshot | undefined, isOwn: (seq: number) => boolean): SubagentIdentityProjection | undefined {
  const identity = snapshot?.[SUBAGENT_IDENTITY_KEY]
  if (identity === undefined || identity === null) return undefined
  return isOwn(identity.seq) ? identity : undefined
}

function childRow(
  id: SessionId,
  activity: 'running' | 'inactive',
  hasChildren: boolean,
  identity: SubagentIdentityProjection,
): SubagentListEntry {
  if (identity.mode === 'continuable')
    return Object.freeze({ kind: 'child', id, activity, hasChildren, mode: 'continuable', label: identity.label })
  return Object.freeze({
    kind: 'child',
    id,
    activity,
    hasChildren,
    mode: 'one-shot',
    ...(identity.label === undefined ? {} : { label: identity.label }),
  })
}

function diagnostic(id: SessionId, reason: 'corrupt' | 'unavailable'): SubagentListEntry {
  return Object.freeze({ kind: 'diagnostic', id, reason })
}
