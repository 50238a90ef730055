import { type SessionId, sameLifecycle } from '@dsh/session'
import type { ProjectionKey, ProjectionSnapshot, SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import type { SessionQuery, SessionQueryObservation } from '@dsh/session-query'
import { cancelled } from './errors.js'
import type { Candidate } from './list-corpus.js'
import type { ListingScope } from './list-scope.js'

/**
 * The cold rungs of the projection ladder, shared by the catalog and by tree
 * snapshots (rung 1, a live session, is the registry's own `snapshot`).
 *
 * - Rung 2: the checkpoint cache at the exact cut the listing record carries.
 *   A miss, a fault or a poisoned row is `undefined`: the cache is derived
 *   data and never decides anything on its own.
 * - Rung 3: one body-bearing observation folded through the registered
 *   units. A failed read or fold is `failed`; an observation of another
 *   lifecycle under the same id is `other-lifecycle` and leaks nothing of it.
 */

export interface LadderDeps {
  readonly projections: SessionProjections
  readonly cache: SessionProjectionCache | undefined
  readonly query: SessionQuery
}

export type ObservedRung =
  | {
      readonly kind: 'snapshot'
      readonly snapshot: ProjectionSnapshot
      /** The observed fork cut and event count (an own-suffix gate uses both). */
      readonly cut: number
      readonly count: number
    }
  | { readonly kind: 'failed'; readonly stage: 'read' | 'fold'; readonly error: unknown }
  | { readonly kind: 'other-lifecycle' }

/** Rung 2: the cached snapshot of `keys` at the candidate's cut, or `undefined` (no cache, miss, fault). */
export function cachedRung(deps: LadderDeps, candidate: Candidate, keys: readonly ProjectionKey[]): ProjectionSnapshot | undefined {
  if (deps.cache === undefined) return undefined
  try {
    return deps.cache.cachedSnapshot(candidate.header, candidate.inheritedEventCount, keys)
  } catch {
    return undefined
  }
}

/** Rung 3: one observation of the candidate, folded through `keys` at the observed cut. Rejects only with `CANCELLED`. */
export async function observedRung(
  deps: LadderDeps,
  candidate: Candidate,
  keys: readonly ProjectionKey[],
  scope: ListingScope,
): Promise<ObservedRung> {
  const id: SessionId = candidate.header.id
  let observation: SessionQueryObservation
  try {
    observation = await scope.read((signal) => deps.query.observeSession(id, signal))
  } catch (error) {
    if (scope.aborted) throw cancelled()
    return { kind: 'failed', stage: 'read', error }
  }
  if (!sameLifecycle(observation.header, candidate.header)) return { kind: 'other-lifecycle' }
  try {
    const snapshot = deps.projections.fold(observation.events, { inheritedEventCount: observation.inheritedEventCount }, keys)
    return { kind: 'snapshot', snapshot, cut: observation.inheritedEventCount, count: observation.events.length }
  } catch (error) {
    return { kind: 'failed', stage: 'fold', error }
  }
}
