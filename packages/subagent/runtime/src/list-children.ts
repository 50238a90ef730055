import { isDshError, raceAbort, throwIfAborted } from '@dsh/context'
import { type Session, type SessionHeader, type SessionId, type SessionLogOffset, type SessionStore, sameLifecycle } from '@dsh/session'
import type { ProjectionSnapshot, SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import type { SessionQuery, SessionQueryObservation } from '@dsh/session-query'
import { mapBounded } from './concurrency.js'
import { SUBAGENT_DESCRIPTOR_EVENT } from './descriptor.js'
import { cancelled, SubagentError } from './errors.js'
import type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry, SubagentListRung } from './list-types.js'
import { SUBAGENT_IDENTITY_KEY } from './projection.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/**
 * How many per-child tasks (and so cold body reads) run at once. It bounds a
 * read-only scan of local media; a networked persistence backend would make
 * it a validated config field.
 */
export const COLD_READ_CONCURRENCY = 4

const KEYS = [SUBAGENT_IDENTITY_KEY] as const

interface CatalogDeps {
  readonly sessions: SessionStore
  readonly projections: SessionProjections
  readonly query: SessionQuery
  readonly cache: SessionProjectionCache | undefined
}

/** A child as enumerated: header facts only, live header preferred. */
interface Candidate {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** The live Session when one exists in this process: the child is running. */
  readonly live: Session | undefined
}

interface Classified {
  readonly id: SessionId
  readonly hasChildren: boolean
  readonly row: SubagentListEntry | undefined
  readonly rung: SubagentListRung
}

/**
 * Up to this many children, `hasChildren` is answered by one indexed probe per
 * child; beyond it, by one listing of every subagent in the corpus. Probes are
 * cheap on an indexed backend but each is a full corpus pass on the in-memory
 * one, so the fallback keeps a listing linear in the corpus on every backend.
 */
export const HAS_CHILDREN_PROBE_LIMIT = 8

/** A parent's direct subagent children, with the rung that decided each row. */
export async function explainChildren(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<ExplainedSubagentEntry[]> {
  const deps = requireServices(services)
  const parent = checkId(parentId)
  throwIfAborted(signal, cancelled)
  const candidates = await enumerateChildren(deps, parent, signal)
  if (candidates.length === 0) return []
  let hasChildren: (id: SessionId) => Promise<boolean>
  if (candidates.length <= HAS_CHILDREN_PROBE_LIMIT) {
    hasChildren = async (id) => (await enumerateChildren(deps, id, signal, true)).length > 0
  } else {
    const tree = await enumerateTree(deps, 'subagent', signal)
    hasChildren = async (id) => tree.has(id)
  }
  const classified = await classifyAll(deps, candidates, hasChildren, signal)
  return explain(classified, parent, 1)
}

/**
 * Every subagent below `parentId`, depth-first in listing order: each child's
 * row is followed by its own subtree before its next sibling. Children whose
 * row is omitted (creation window) or a diagnostic are still descended into,
 * and so are ordinary (non-subagent) sessions between them — a plain fork of
 * the parent that spawned subagents of its own — which get no row: their
 * subagents list with `parentId` the ordinary session and `depth` counting
 * every link from `parentId`. The tree comes from one header-only listing of
 * the corpus (live headers preferred), so a deep tree costs one query, not
 * one per node, and no body read beyond the ladder's.
 */
export async function explainDescendants(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<ExplainedSubagentEntry[]> {
  const deps = requireServices(services)
  const root = checkId(parentId)
  throwIfAborted(signal, cancelled)
  const tree = await enumerateTree(deps, 'all', signal)
  const hasSubagentChildren = async (id: SessionId): Promise<boolean> => (tree.get(id) ?? []).some(isSubagent)
  const out: ExplainedSubagentEntry[] = []
  // Guards against a parent/child cycle in damaged data (ids reused across lifecycles).
  const visited = new Set<string>([root])
  const walk = async (parent: SessionId, depth: number): Promise<void> => {
    const candidates = (tree.get(parent) ?? []).filter((c) => !visited.has(c.header.id))
    for (const candidate of candidates) visited.add(candidate.header.id)
    const classified = await classifyAll(deps, candidates.filter(isSubagent), hasSubagentChildren, signal)
    const rows = new Map(classified.map((child) => [child.id as string, child]))
    for (const candidate of candidates) {
      const child = rows.get(candidate.header.id)
      if (child?.row !== undefined) out.push(Object.freeze({ row: child.row, rung: child.rung, parentId: parent, depth }))
      if (tree.has(candidate.header.id)) await walk(candidate.header.id, depth + 1)
    }
  }
  await walk(root, 1)
  return out
}

/** The seed's `listChildren`: rows only. */
export async function listChildren(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<SubagentListEntry[]> {
  return (await explainChildren(services, parentId, signal)).map((entry) => entry.row)
}

/** Rows of the whole subtree, depth-first in listing order (see `explainDescendants`). */
export async function listDescendants(
  services: SubagentCatalogServices,
  parentId: string,
  signal?: AbortSignal,
): Promise<SubagentListEntry[]> {
  return (await explainDescendants(services, parentId, signal)).map((entry) => entry.row)
}

function explain(classified: readonly Classified[], parentId: SessionId, depth: number): ExplainedSubagentEntry[] {
  return classified.flatMap((child) =>
    child.row === undefined ? [] : [Object.freeze({ row: child.row, rung: child.rung, parentId, depth })],
  )
}

// Checked up front, before any read, so a missing service fails with its code
// even when the parent has no children at all.
function requireServices(services: SubagentCatalogServices): CatalogDeps {
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
      "Listing subagents needs the 'sessionQuery' service to enumerate the session corpus; activate a session-query backend (memory or SQLite).",
    )
  }
  return { sessions: services.sessions, projections, query: services.sessionQuery, cache: services.sessionProjectionCache }
}

function checkId(id: string): SessionId {
  if (typeof id !== 'string' || id.length === 0) {
    throw new SubagentError(
      'SUBAGENT_INVALID_ARGUMENT',
      `A parent session id must be a non-empty string, got ${JSON.stringify(id) ?? String(id)}.`,
    )
  }
  return id as SessionId
}

/** Every read is checked before and after, and one that settles after an abort is rejected as CANCELLED. */
async function read<T>(signal: AbortSignal | undefined, op: () => Promise<T>): Promise<T> {
  throwIfAborted(signal, cancelled)
  const result = await raceAbort(op(), signal, cancelled)
  throwIfAborted(signal, cancelled)
  return result
}

/**
 * The parent's subagent children from the query corpus (an indexed query on
 * a backend with an index), each paired with its live Session when one exists
 * (the live header wins), ordered by createdAt then id. With `probe`, stops at
 * the first child found. A corpus failure fails the whole listing.
 */
async function enumerateChildren(
  deps: CatalogDeps,
  parentId: SessionId,
  signal: AbortSignal | undefined,
  probe = false,
): Promise<Candidate[]> {
  const candidates: Candidate[] = []
  await listCorpus(deps, { parentSession: parentId, ...(probe ? { limit: 16 } : {}) }, signal, 'subagent', (candidate) => {
    if (candidate.header.parentSession === parentId) candidates.push(candidate)
    return !(probe && candidates.length > 0)
  })
  return candidates.sort(byCreatedAtThenId)
}

function isSubagent(candidate: Candidate): boolean {
  return candidate.header.origin === 'subagent'
}

/** Every subagent (or every session) in the corpus grouped by (live-preferred) parent, each group ordered. */
async function enumerateTree(
  deps: CatalogDeps,
  scope: 'subagent' | 'all',
  signal: AbortSignal | undefined,
): Promise<Map<string, Candidate[]>> {
  const tree = new Map<string, Candidate[]>()
  await listCorpus(deps, {}, signal, scope, (candidate) => {
    const parent = candidate.header.parentSession
    if (parent === undefined) return true
    const siblings = tree.get(parent)
    if (siblings === undefined) tree.set(parent, [candidate])
    else siblings.push(candidate)
    return true
  })
  for (const siblings of tree.values()) siblings.sort(byCreatedAtThenId)
  return tree
}

/**
 * Pages through `listSessions` with `filter` (plus `origin: 'subagent'` unless
 * `scope` is `all`), applying live preference, until `visit` returns false or
 * pages run out.
 */
async function listCorpus(
  deps: CatalogDeps,
  filter: { readonly parentSession?: string; readonly limit?: number },
  signal: AbortSignal | undefined,
  scope: 'subagent' | 'all',
  visit: (candidate: Candidate) => boolean,
): Promise<void> {
  let cursor: string | undefined
  do {
    const page = await read(signal, () =>
      deps.query.listSessions(
        { ...filter, ...(scope === 'subagent' ? { origin: 'subagent' } : {}), ...(cursor === undefined ? {} : { cursor }) },
        signal,
      ),
    ).catch((error: unknown) => {
      throw enumerationFailure(error, filter.parentSession)
    })
    for (const record of page.records) {
      const live = deps.sessions.get(record.header.id)
      const header = live?.header ?? record.header
      if (scope === 'subagent' && header.origin !== 'subagent') continue
      if (!visit({ header, inheritedEventCount: live?.inheritedEventCount ?? record.inheritedEventCount, live })) return
    }
    cursor = page.nextCursor
  } while (cursor !== undefined)
}

function enumerationFailure(error: unknown, parentId: string | undefined): unknown {
  if (isDshError(error, 'CANCELLED')) return error
  const detail = error instanceof Error ? error.message : String(error)
  const what = parentId === undefined ? 'the subagent corpus' : `the subagents of '${parentId}'`
  return new SubagentError(
    'SUBAGENT_CONTROL_ENUMERATION_FAILED',
    `Could not enumerate ${what}: the session query corpus failed (${detail}).`,
    {
      cause: error,
      ...(isDshError(error) ? { details: { queryCode: error.code } } : {}),
    },
  )
}

function byCreatedAtThenId(a: Candidate, b: Candidate): number {
  return a.header.createdAt - b.header.createdAt || (a.header.id < b.header.id ? -1 : a.header.id > b.header.id ? 1 : 0)
}

function classifyAll(
  deps: CatalogDeps,
  candidates: readonly Candidate[],
  hasChildrenOf: (id: SessionId) => Promise<boolean>,
  signal: AbortSignal | undefined,
): Promise<Classified[]> {
  return mapBounded(candidates, COLD_READ_CONCURRENCY, async (candidate) => {
    const hasChildren = await hasChildrenOf(candidate.header.id)
    const { row, rung } = await retrieve(deps, candidate, hasChildren, signal)
    return { id: candidate.header.id, hasChildren, row, rung }
  })
}

/** The three-rung ladder plus the four-state mapping for one child. */
async function retrieve(
  deps: CatalogDeps,
  candidate: Candidate,
  hasChildren: boolean,
  signal: AbortSignal | undefined,
): Promise<{ row: SubagentListEntry | undefined; rung: SubagentListRung }> {
  const id = candidate.header.id
  const live = candidate.live
  if (live !== undefined) {
    // Rung 1: the registry's watermark cache; zero log reads.
    const identity = identityOf(deps.projections.snapshot(live, KEYS), (seq) => live.isOwnSeq(seq))
    if (identity !== undefined) return { row: childRow(id, 'running', hasChildren, identity), rung: 1 }
    // No own identity while running. The seed's four-state table omits such a
    // child (the creation window: its descriptor is not appended yet), and its
    // text gives a *poisoned* running child (a descriptor that folds to the
    // null sentinel) a corrupt row. The runtime appends the descriptor as the
    // first own event, so one O(1) look at that event's type (no parsing: the
    // unit alone interprets payloads) tells the two apart.
    const first = live.eventAt(live.inheritedEventCount)
    return { row: first?.type === SUBAGENT_DESCRIPTOR_EVENT ? diagnostic(id, 'corrupt') : undefined, rung: 1 }
  }

  // Rung 2: the optional checkpoint cache at the exact cut listing records carry
  // (seeded children included). Any fault here is a miss: the cache is derived data.
  if (deps.cache !== undefined) {
    try {
      const cut = candidate.inheritedEventCount
      const identity = identityOf(deps.cache.cachedSnapshot(candidate.header, cut, KEYS), (seq) => seq >= cut)
      if (identity !== undefined) return { row: childRow(id, 'inactive', hasChildren, identity), rung: 2 }
    } catch {
      // Fall through to the authoritative refold.
    }
  }

  // Rung 3: one body-bearing observation folded through the registered unit.
  let observation: SessionQueryObservation
  try {
    observation = await read(signal, () => deps.query.observeSession(id, signal))
  } catch {
    if (signal?.aborted) throw cancelled()
    return { row: diagnostic(id, 'unavailable'), rung: 3 }
  }
  // The lifecycle witness: a session deleted and republished under this id is
  // another lifecycle; report the enumerated one as corrupt and leak nothing.
  if (!sameLifecycle(observation.header, candidate.header)) return { row: diagnostic(id, 'corrupt'), rung: 3 }
  let snapshot: ProjectionSnapshot
  try {
    snapshot = deps.projections.fold(observation.events, { inheritedEventCount: observation.inheritedEventCount }, KEYS)
  } catch {
    return { row: diagnostic(id, 'unavailable'), rung: 3 }
  }
  const cut = observation.inheritedEventCount
  const count = observation.events.length
  const identity = identityOf(snapshot, (seq) => seq >= cut && seq < count)
  return { row: identity === undefined ? diagnostic(id, 'corrupt') : childRow(id, 'inactive', hasChildren, identity), rung: 3 }
}

/** The non-null identity of a snapshot when its descriptor seq passes the own-suffix gate. */
function identityOf(snapshot: ProjectionSnapshot | undefined, isOwn: (seq: number) => boolean): SubagentIdentityProjection | undefined {
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
