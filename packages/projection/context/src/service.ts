import { type Session, type SessionHeader, SessionId, type SessionLogOffset, sameLifecycle } from '@dsh/session'
import type { SessionPersistence, SessionRangeObservation } from '@dsh/session-persistence'
import type { SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import { initState } from './draft.js'
import { SessionContextError } from './errors.js'
import { SESSION_CONTEXT_KEY, type SessionContext, type SessionContextState } from './types.js'
import { applyContextEvent } from './unit.js'
import { contextView } from './view.js'

/** A persisted session as a listing or query record names it: its header and exact cut. */
export interface SessionRecordRef {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
}

/** A live `Session`, a persisted session's record, or a session id (live if the store holds it, else persisted). */
export type ContextTarget = Session | SessionRecordRef | string

/** Counters for tests and benchmarks: they pin what a read cost instead of timing it. */
export interface SessionContextMetrics {
  /** Answers from a live session's watermark (no I/O). */
  live: number
  /** Cold answers that started from a projection-cache checkpoint. */
  checkpointHits: number
  /** Cold answers for which the cache (present) had no usable checkpoint. */
  checkpointMisses: number
  /** Cold answers that started from this service's own last answer for the session. */
  memoHits: number
  /** `inspectRange(id, { limit: 0 })` reads: a header for a target given by id only. */
  headerReads: number
  /** `inspectRange(id, { from })` reads of events. */
  rangeReads: number
  /** Events those reads returned. */
  eventsRead: number
  /** Cold answers folded from the log's first event (no checkpoint, or one that does not match the log). */
  refolds: number
}

/** Service `sessionContext`. */
export interface SessionContextService {
  /**
   * The model-visible context of a session. Live: the unit's watermark,
   * which costs the events since the last fold. Cold: the newest checkpoint
   * (this service's last answer, else the projection cache's row), then only
   * the events after it, read with `inspectRange(id, { from })`; without a
   * checkpoint the whole log is read and folded.
   */
  contextOf(target: ContextTarget, signal?: AbortSignal): Promise<SessionContext>
  /** The unit's state behind `contextOf` (the checkpointable form). */
  stateOf(target: ContextTarget, signal?: AbortSignal): Promise<SessionContextState>
  readonly metrics: Readonly<SessionContextMetrics>
}

export interface SessionContextServiceOptions {
  readonly projections: SessionProjections
  /** Looked up per call: the live store, the persistence and the cache may be provided after this service. */
  readonly sessions?: () => { get(id: string): Session | undefined } | undefined
  readonly persistence?: () => SessionPersistence | undefined
  readonly cache?: () => SessionProjectionCache | undefined
  /**
   * Cold sessions whose last answer is kept to continue from (least recently
   * used first out). Default 16; 0 keeps none. A kept state is the whole
   * context (megabytes for a long session), so the bound stays small: a
   * session that went cold has its final checkpoint in the cache anyway, and
   * the memo serves a session another process is still writing.
   */
  readonly memo?: number
}

export const DEFAULT_CONTEXT_MEMO = 16

interface Memo {
  readonly header: SessionHeader
  readonly cut: number
  readonly state: SessionContextState
}

function isSession(target: unknown): target is Session {
  return (
    typeof target === 'object' &&
    target !== null &&
    typeof (target as Session).append === 'function' &&
    // Not `events`: that getter copies and freezes the whole log after every append.
    typeof (target as Session).eventAt === 'function'
  )
}

function isRecordRef(target: unknown): target is SessionRecordRef {
  if (typeof target !== 'object' || target === null) return false
  const { header, inheritedEventCount } = target as Partial<SessionRecordRef>
  return typeof header === 'object' && header !== null && typeof header.id === 'string' && typeof inheritedEventCount === 'number'
}

export function createSessionContextService(options: SessionContextServiceOptions): SessionContextService {
  const metrics: SessionContextMetrics = {
    live: 0,
    checkpointHits: 0,
    checkpointMisses: 0,
    memoHits: 0,
    headerReads: 0,
    rangeReads: 0,
    eventsRead: 0,
    refolds: 0,
  }
  const memoSize = options.memo ?? DEFAULT_CONTEXT_MEMO
  const memos = new Map<string, Memo>()

  const liveState = (session: Session): SessionContextState => {
    metrics.live++
    const state = options.projections.snapshot(session, [SESSION_CONTEXT_KEY])[SESSION_CONTEXT_KEY]
    if (state !== undefined) return state
    // The unit is not registered on this registry: fold the in-memory log.
    let folded = initState()
    for (const event of session.events) folded = applyContextEvent(folded, event)
    return folded
  }

  const remember = (id: string, memo: Memo): void => {
    if (memoSize <= 0) return
    memos.delete(id)
    memos.set(id, memo)
    for (const oldest of memos.keys()) {
      if (memos.size <= memoSize) break
      memos.delete(oldest)
    }
  }

  const checkpointOf = (id: string, header: SessionHeader, cut: SessionLogOffset): SessionContextState | undefined => {
    const memo = memos.get(id)
    if (memo !== undefined && memo.cut === cut && sameLifecycle(memo.header, header)) {
      metrics.memoHits++
      return memo.state
    }
    const cache = options.cache?.()
    if (cache === undefined) return undefined
    let state: SessionContextState | undefined
    try {
      state = cache.cachedSnapshot(header, cut, [SESSION_CONTEXT_KEY])?.[SESSION_CONTEXT_KEY]
    } catch {
      // A poisoned row is a miss: the log is the truth.
      state = undefined
    }
    if (state === undefined) metrics.checkpointMisses++
    else metrics.checkpointHits++
    return state
  }

  const read = async (
    persistence: SessionPersistence,
    id: SessionId,
    from: number,
    signal?: AbortSignal,
  ): Promise<SessionRangeObservation> => {
    metrics.rangeReads++
    const observation = await persistence.inspectRange(id, { from: from as SessionLogOffset }, signal)
    metrics.eventsRead += observation.events.length
    return observation
  }

  const coldState = async (idText: string, ref: SessionRecordRef | undefined, signal?: AbortSignal): Promise<SessionContextState> => {
    const persistence = options.persistence?.()
    if (persistence === undefined) {
      throw new SessionContextError(
        'SESSION_CONTEXT_NO_PERSISTENCE',
        `Session '${idText}' is not live and no 'sessionPersistence' service is available to read it; provide one before asking for a cold session's context.`,
      )
    }
    const id = SessionId(idText)
    let known = ref
    if (known === undefined) {
      metrics.headerReads++
      known = await persistence.inspectRange(id, { limit: 0 }, signal)
    }
    const { header, inheritedEventCount: cut } = known
    let start = checkpointOf(idText, header, cut)
    let from = start === undefined ? 0 : start.seq + 1
    let observation = await read(persistence, id, from, signal)
    if (
      start !== undefined &&
      (observation.from !== from || observation.inheritedEventCount !== cut || !sameLifecycle(observation.header, header))
    ) {
      // The checkpoint describes another lifecycle or a longer log than there is: fold the log from its start.
      start = undefined
      from = 0
      observation = await read(persistence, id, 0, signal)
    }
    if (start === undefined) metrics.refolds++
    let state = start ?? initState()
    for (const event of observation.events) state = applyContextEvent(state, event)
    remember(idText, { header: observation.header, cut: observation.inheritedEventCount, state })
    return state
  }

  const stateOf = async (target: ContextTarget, signal?: AbortSignal): Promise<SessionContextState> => {
    if (isSession(target)) return liveState(target)
    if (typeof target === 'string' && target.length > 0) {
      const live = options.sessions?.()?.get(target)
      return live === undefined ? coldState(target, undefined, signal) : liveState(live)
    }
    if (isRecordRef(target)) {
      const live = options.sessions?.()?.get(target.header.id)
      return live === undefined ? coldState(target.header.id, target, signal) : liveState(live)
    }
    throw new SessionContextError(
      'SESSION_CONTEXT_INVALID_TARGET',
      'contextOf needs a live Session, a session record { header, inheritedEventCount }, or a non-empty session id.',
    )
  }

  return {
    stateOf,
    contextOf: async (target, signal) => contextView(await stateOf(target, signal)),
    metrics,
  }
}
