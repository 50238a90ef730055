import { compareSessionIds, type Session, type SessionHeader, type SessionId, type SessionLogOffset, type SessionStore } from '@dsh/session'
import type { SessionListFilter, SessionQuery } from '@dsh/session-query'
import { MAX_PAGE_SIZE } from '@dsh/session-query/backend'
import type { ListingScope } from './list-scope.js'

/**
 * Enumeration: which children a listing classifies, from header facts only.
 *
 * The corpus is the query layer's live-preferred listing; each listed id is
 * paired with the live Session of that id when this process has one, and the
 * live header then wins (with no consistency check). A child is a session
 * whose header says `origin: 'subagent'` and names the parent in
 * `parentSession`. Order: `createdAt` ascending, then id in code point order
 * (`compareSessionIds`). A query failure fails the whole enumeration with the
 * query's own error.
 */

/** A child as enumerated: header facts only, live header preferred. */
export interface Candidate {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** The live Session when one exists in this process: the child is running. */
  readonly live: Session | undefined
}

export interface CorpusDeps {
  readonly sessions: SessionStore
  readonly query: SessionQuery
}

export function isSubagent(candidate: Candidate): boolean {
  return candidate.header.origin === 'subagent'
}

export function byCreatedAtThenId(a: Candidate, b: Candidate): number {
  return a.header.createdAt - b.header.createdAt || compareSessionIds(a.header.id, b.header.id)
}

/** The parent's subagent children (an indexed query on a backend with an index), ordered. */
export async function enumerateChildren(deps: CorpusDeps, parentId: SessionId, scope: ListingScope): Promise<Candidate[]> {
  const candidates: Candidate[] = []
  await listCorpus(deps, { parentSession: parentId }, scope, 'subagent', (candidate) => {
    if (candidate.header.parentSession === parentId) candidates.push(candidate)
    return true
  })
  return candidates.sort(byCreatedAtThenId)
}

/**
 * The children of each of `parentIds` (subagents only, or every session),
 * grouped by their (live-preferred) parent, each group ordered: one
 * `parentSessions` listing per `MAX_PAGE_SIZE` parents, so the cost follows
 * these parents' children, not the corpus. A parent without children has no
 * entry.
 */
export async function enumerateChildrenOf(
  deps: CorpusDeps,
  parentIds: readonly SessionId[],
  scopeOf: 'subagent' | 'all',
  scope: ListingScope,
): Promise<Map<string, Candidate[]>> {
  const groups = new Map<string, Candidate[]>()
  const wanted = new Set<string>(parentIds)
  const distinct = [...wanted]
  for (let at = 0; at < distinct.length; at += MAX_PAGE_SIZE) {
    await listCorpus(deps, { parentSessions: distinct.slice(at, at + MAX_PAGE_SIZE) }, scope, scopeOf, (candidate) => {
      const parent = candidate.header.parentSession
      if (parent === undefined || !wanted.has(parent)) return true
      const siblings = groups.get(parent)
      if (siblings === undefined) groups.set(parent, [candidate])
      else siblings.push(candidate)
      return true
    })
  }
  for (const siblings of groups.values()) siblings.sort(byCreatedAtThenId)
  return groups
}

/**
 * Every session below `root` (subagents and ordinary ones) grouped by its
 * (live-preferred) parent, each group ordered, one generation per listing:
 * the cost follows the family, not the corpus. Each id is expanded once,
 * which also ends a parent/child cycle in damaged data. `maxDepth`
 * generations at most (the children are generation 1).
 */
export async function enumerateFamily(
  deps: CorpusDeps,
  root: SessionId,
  scope: ListingScope,
  maxDepth = Number.POSITIVE_INFINITY,
): Promise<Map<string, Candidate[]>> {
  const tree = new Map<string, Candidate[]>()
  const expanded = new Set<string>([root])
  let generation: SessionId[] = [root]
  for (let depth = 1; generation.length > 0 && depth <= maxDepth; depth++) {
    const groups = await enumerateChildrenOf(deps, generation, 'all', scope)
    const next: SessionId[] = []
    for (const [parent, children] of groups) {
      tree.set(parent, children)
      for (const child of children) {
        if (expanded.has(child.header.id)) continue
        expanded.add(child.header.id)
        next.push(child.header.id)
      }
    }
    generation = next
  }
  return tree
}

/** The listed session `id` (any origin, live header preferred), by one lookup of its row; undefined when it is not listed. */
export async function findSession(deps: CorpusDeps, id: SessionId, scope: ListingScope): Promise<Candidate | undefined> {
  let found: Candidate | undefined
  await listCorpus(deps, { ids: [id] }, scope, 'all', (candidate) => {
    if (candidate.header.id === id) found = candidate
    return found === undefined
  })
  return found
}

/**
 * Pages through `listSessions` with `filter` (plus `origin: 'subagent'` unless
 * `which` is `all`), applying live preference, until `visit` returns false or
 * the pages run out.
 */
async function listCorpus(
  deps: CorpusDeps,
  filter: Pick<SessionListFilter, 'parentSession' | 'parentSessions' | 'ids'>,
  scope: ListingScope,
  which: 'subagent' | 'all',
  visit: (candidate: Candidate) => boolean,
): Promise<void> {
  let cursor: string | undefined
  // The largest page the query takes: a family of up to that many sessions is one page, with no cursor to make.
  const limit = MAX_PAGE_SIZE
  do {
    const page = await scope.read((signal) =>
      deps.query.listSessions(
        { ...filter, limit, ...(which === 'subagent' ? { origin: 'subagent' } : {}), ...(cursor === undefined ? {} : { cursor }) },
        signal,
      ),
    )
    for (const record of page.records) {
      const live = deps.sessions.get(record.header.id)
      const header = live?.header ?? record.header
      if (which === 'subagent' && header.origin !== 'subagent') continue
      if (!visit({ header, inheritedEventCount: live?.inheritedEventCount ?? record.inheritedEventCount, live })) return
    }
    cursor = page.nextCursor
  } while (cursor !== undefined)
}
