import { isDshError, raceAbort, throwIfAborted } from '@dsh/context'
import type { Session, SessionHeader, SessionId, SessionStore, StoredSessionEvent } from '@dsh/session'
import { type BusyChild, guardRead, type RuntimeCore } from './core.js'
import type { SubagentRun } from './driver.js'
import { busy, cancelled, closed, notFound, notResumable, SubagentError } from './errors.js'
import { SUBAGENT_END_EVENT, SUBAGENT_NOTICE_EVENT, type SubagentNotice } from './lifecycle.js'
import { checkInputText, checkReportText } from './limits.js'
import { isClosed, lastSettlement, noticesSinceLastTurn, pendingQueued } from './log-scan.js'
import { resumeWaiting, runDriver, settle } from './runs.js'
import {
  type CallerOptions,
  type CloseResult,
  DEFAULT_WAIT_MS,
  type InterruptOptions,
  MAX_WAIT_MS,
  type SubagentHandle,
  type SubagentSettlement,
  type WaitEntry,
  type WaitOptions,
} from './runtime-types.js'

/**
 * Control of children by their parent or an ancestor (interrupt, close,
 * wait), a child's report to its parent, and a top-level session's own turn.
 *
 * Invariants:
 * - Only the child's parent or an ancestor through `parentSession` links may
 *   interrupt, close or wait for it (`SUBAGENT_UNAUTHORIZED`); the chain is
 *   followed at most 64 links and never around a cycle.
 * - A closed child's last own event is `subagent/end {reason:'closed'}`, and
 *   nothing runs after it.
 */

/** How many `parentSession` links an ancestor check follows (a guard against damaged, cyclic data). */
const MAX_ANCESTRY = 64

/**
 * Aborts the child's current run (its turn ends `cancelled`). With a
 * `caller`, only the child's parent or an ancestor may do it. Queued input
 * still follows unless `queued: 'park'` keeps it logged and undelivered for
 * the next send or resume. Resolves true when a run was in progress — once it
 * has settled, or with `until: 'requested'` as soon as the stop is requested —
 * and false when nothing was running (the call then changes nothing).
 */
export async function interruptChild(core: RuntimeCore, childId: string, options?: InterruptOptions): Promise<boolean> {
  if (options !== undefined) {
    checkInterruptOptions(options)
    await authorizeAncestor(core, options.caller, childId)
  }
  const run = core.runs.get(childId)
  if (run === undefined) return false
  const state = core.busy.get(childId)
  if (options?.queued === 'park' && state !== undefined) state.stop ??= 'park'
  run.controller.abort()
  if (options?.until !== 'requested') await run.done
  return true
}

function checkInterruptOptions(options: InterruptOptions): void {
  const { queued, until } = options
  if (queued !== undefined && queued !== 'deliver' && queued !== 'park')
    throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `An interrupt's queued must be 'deliver' or 'park', got ${String(queued)}.`)
  if (until !== undefined && until !== 'settled' && until !== 'requested')
    throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `An interrupt's until must be 'settled' or 'requested', got ${String(until)}.`)
}

/**
 * Settles and closes a continuable child: interrupts a running turn, drops
 * queued input, and appends the final `subagent/end {reason:'closed'}`. A
 * `signal` already aborted when it is called rejects with `CANCELLED` and
 * changes nothing. Once under way, a close goes ahead: an abort then cancels
 * only the load of a cold child, before anything is written (a caller that
 * stops waiting for a running turn to end races its own signal).
 */
export async function closeChild(core: RuntimeCore, childId: string, options: CallerOptions, signal?: AbortSignal): Promise<CloseResult> {
  core.assertLive()
  throwIfAborted(signal, cancelled)
  await authorizeAncestor(core, options.caller, childId)
  const sessions = core.sessions()
  core.projections()
  const state = core.busy.get(childId)
  if (state?.settling === true) await state.idle
  else if (state !== undefined) {
    if (state.identity.mode !== 'continuable') throw notResumable(childId)
    if (state.stop === 'close') throw closed(childId)
    state.stop = 'close'
    const dropped = state.inbox.length
    const run = core.runs.get(childId)
    run?.controller.abort()
    resumeWaiting(core, state)
    await state.idle
    return { id: childId as SessionId, interrupted: run !== undefined, dropped }
  }
  const live = sessions.get(childId)
  const child = live ?? (await restoreForWrite(core, sessions, childId, signal))
  try {
    if (core.identityOf(child)?.mode !== 'continuable') throw notResumable(childId)
    if (isClosed(child.events, child.inheritedEventCount)) throw closed(childId)
    const dropped = pendingQueued(child.events, child.inheritedEventCount).length
    child.append(SUBAGENT_END_EVENT, { reason: 'closed', ...(dropped > 0 ? { dropped } : {}) })
    // `wait` reports a closed child as closed, never by the run it settled before.
    core.forget(child.id)
    return { id: child.id, interrupted: false, dropped }
  } finally {
    if (live === undefined) await settle(core, sessions, child)
  }
}

/**
 * Waits until every listed child is idle, the timeout passes or `signal`
 * aborts, then reports each: `running` (with its queued count), `settled`,
 * `closed`, or `not-found`. Parent or ancestor only.
 */
export async function waitFor(core: RuntimeCore, childIds: readonly string[], options: WaitOptions): Promise<WaitEntry[]> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_MS
  if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
    throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `timeoutMs must be a non-negative number, got ${String(timeoutMs)}.`)
  const known = new Set<string>()
  for (const id of childIds) {
    try {
      await authorizeAncestor(core, options.caller, id)
      known.add(id)
    } catch (error) {
      if (!isDshError(error, 'SUBAGENT_NOT_FOUND')) throw error
    }
  }
  const busyChildren = [...known].flatMap((id) => {
    const state = core.busy.get(id)
    return state === undefined ? [] : [state]
  })
  if (busyChildren.length > 0) await untilIdle(busyChildren, Math.min(timeoutMs, MAX_WAIT_MS), options.signal)
  throwIfAborted(options.signal, cancelled)
  const out: WaitEntry[] = []
  for (const id of childIds) out.push(known.has(id) ? await status(core, id, options.signal) : { id, state: 'not-found' })
  return out
}

/** A child tells its live parent something: a `report` notice its driver receives on its next turn. */
export function reportToParent(core: RuntimeCore, agent: Session | string, text: string): SubagentNotice {
  const sessions = core.sessions()
  const child = core.liveCaller(sessions, agent, 'SUBAGENT_NOT_FOUND')
  checkReportText(text)
  const parentId = child.header.parentSession
  if (child.header.origin !== 'subagent' || parentId === undefined) {
    throw new SubagentError('SUBAGENT_NOT_A_SUBAGENT', `Session '${child.id}' is not a subagent, so it has no parent to report to.`)
  }
  const parent = sessions.get(parentId)
  if (parent === undefined || parent.closed) {
    throw new SubagentError(
      'SUBAGENT_PARENT_NOT_LIVE',
      `The parent '${parentId}' of '${child.id}' is not live in this process; the report cannot be delivered (put it in your final message instead).`,
    )
  }
  const identity = core.identityOf(child)
  const notice: SubagentNotice = {
    kind: 'report',
    child: child.id,
    ...(identity === undefined ? {} : { mode: identity.mode }),
    ...(identity?.label === undefined ? {} : { label: identity.label }),
    text,
  }
  parent.append(SUBAGENT_NOTICE_EVENT, notice)
  return notice
}

/**
 * One turn of a top-level (or any live, non-running) session through the
 * driver, with its pending notices and the runtime's tools. No lifecycle
 * events: those belong to children. The session stays live.
 */
export function driveSession(core: RuntimeCore, session: Session | string, options: { readonly prompt?: string }): SubagentHandle {
  core.assertLive()
  checkInputText(options.prompt, 'prompt')
  const sessions = core.sessions()
  const live = core.liveCaller(sessions, session, 'SUBAGENT_NOT_FOUND')
  if (core.runs.has(live.id) || core.busy.has(live.id) || live.openTurnBefore() !== undefined) throw busy(live.id)
  const controller = new AbortController()
  if (options.prompt !== undefined) live.append('user/message', { text: options.prompt })
  const run: SubagentRun = {
    kind: 'drive',
    session: live,
    turn: live.nextTurn(),
    notices: noticesSinceLastTurn(live),
    tools: core.toolsFor(live, undefined),
    signal: controller.signal,
    ...(options.prompt === undefined ? {} : { prompt: options.prompt }),
  }
  const done = (async (): Promise<SubagentSettlement> => {
    await Promise.resolve()
    const outcome = await runDriver(core, run)
    core.runs.delete(live.id)
    return { ...outcome, end: outcome.reason }
  })()
  core.runs.set(live.id, { session: live, controller, done })
  return { id: live.id, session: live, done }
}

/** What `wait` reports for a child that is not busy (memory first, else one read of its log). */
async function status(core: RuntimeCore, id: string, signal: AbortSignal | undefined): Promise<WaitEntry> {
  const state = core.busy.get(id)
  if (state !== undefined) return { id, state: 'running', queued: state.inbox.length }
  const live = core.services.get('sessions')?.get(id)
  let events: readonly StoredSessionEvent[]
  let cut: number
  if (live !== undefined) {
    events = live.events
    cut = live.inheritedEventCount
  } else {
    const remembered = core.rememberedSettlement(id)
    if (remembered !== undefined) return remembered
    const query = core.services.get('sessionQuery')
    if (query === undefined) return { id, state: 'not-found' }
    const observation = await raceAbort(query.observeSession(id, signal), signal, cancelled).catch((error: unknown) => {
      if (isDshError(error, 'SESSION_QUERY_NOT_FOUND')) return undefined
      throw error
    })
    if (observation === undefined) return { id, state: 'not-found' }
    events = observation.events
    cut = observation.inheritedEventCount
  }
  return lastSettlement(id, events, cut)
}

/** The caller must be live, and the child's parent or an ancestor through `parentSession` links. */
async function authorizeAncestor(core: RuntimeCore, callerRef: Session | string, childId: string): Promise<void> {
  const sessions = core.sessions()
  const caller = core.liveCaller(sessions, callerRef, 'SUBAGENT_UNAUTHORIZED')
  const header = await headerOf(core, childId)
  if (header === undefined || header.origin !== 'subagent') throw notFound(childId)
  let current = header.parentSession
  const seen = new Set<string>([childId])
  for (let hops = 0; current !== undefined && hops < MAX_ANCESTRY && !seen.has(current); hops++) {
    if (current === caller.id) return
    seen.add(current)
    current = (await headerOf(core, current).catch(() => undefined))?.parentSession
  }
  throw new SubagentError(
    'SUBAGENT_UNAUTHORIZED',
    `Session '${caller.id}' is neither the parent nor an ancestor of subagent '${childId}'; only they may control it.`,
  )
}

/** A session's header: live, else from persistence (a read of the header alone, not of the log). */
async function headerOf(core: RuntimeCore, id: string): Promise<SessionHeader | undefined> {
  const live = core.services.get('sessions')?.get(id)
  if (live !== undefined) return live.header
  const persistence = core.services.get('sessionPersistence')
  if (persistence === undefined || typeof id !== 'string' || id.length === 0) return undefined
  try {
    return (await persistence.inspectRange(id as SessionId, { limit: 0 })).header
  } catch (error) {
    if (isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND')) return undefined
    throw error
  }
}

async function restoreForWrite(
  core: RuntimeCore,
  sessions: SessionStore,
  childId: string,
  signal: AbortSignal | undefined,
): Promise<Session> {
  const persistence = core.persistence(childId)
  const loaded = await guardRead(signal, () => persistence.load(childId as SessionId, signal), childId)
  if (sessions.get(childId) !== undefined) throw busy(childId)
  return sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
}

/**
 * Resolves when every one of `children` is idle, `ms` pass, or `signal`
 * aborts — whichever is first. It waits through each child's `waiters` and
 * takes itself out of them when it resolves, so waits that time out leave
 * nothing behind on a child that stays busy.
 */
function untilIdle(children: readonly BusyChild[], ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const pending = new Set(children)
    const waiters = new Map<BusyChild, () => void>()
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', finish)
      for (const child of pending) child.waiters.delete(waiters.get(child)!)
      pending.clear()
      resolve()
    }
    for (const child of pending) {
      const waiter = (): void => {
        pending.delete(child)
        if (pending.size === 0) finish()
      }
      waiters.set(child, waiter)
      child.waiters.add(waiter)
    }
    if (signal?.aborted === true) return finish()
    signal?.addEventListener('abort', finish, { once: true })
    timer = setTimeout(finish, ms)
  })
}
