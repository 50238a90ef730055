import type { Session, SessionStore } from '@dsh/session'
import type { SubagentBudgetExceeded } from './budget.js'
import { admitRun, armWallTimer, budgetRecord, ledgerFor } from './budget-guard.js'
import type { ActiveRun, BusyChild, ChildProfile, RuntimeCore } from './core.js'
import type { SubagentRun, SubagentRunOutcome, SubagentTool } from './driver.js'
import { describeError } from './errors.js'
import {
  SUBAGENT_END_EVENT,
  SUBAGENT_NOTICE_EVENT,
  SUBAGENT_START_EVENT,
  type SubagentEndData,
  type SubagentEndReason,
  type SubagentNotice,
  type SubagentRunKind,
} from './lifecycle.js'
import { boundedRunError } from './limits.js'
import { lastRequestBoundary, noticesSinceLastTurn, type QueuedInput } from './log-scan.js'
import { loadedOutputChecks, loadOutputChecks, type OutputChecks } from './output-checks.js'
import type { SubagentIdentityProjection } from './projection-types.js'
import type { SubagentHandle, SubagentSettlement } from './runtime-types.js'

/**
 * Runs of children, from start to going cold.
 *
 * Invariants:
 * - Every run of a child sits between `subagent/start` and `subagent/end` in
 *   its log, and its turn is closed even when the driver throws or leaves it
 *   open.
 * - A parent that is live hears of every settled run (`subagent/notice`).
 * - After a run the next input the child got while busy runs, oldest first:
 *   a queued message, or a settlement notice of one of its own subagents that
 *   its last model call had not read (one run per notice).
 * - When none is left, a continuable child whose own subagents are still
 *   running stays busy and live, `waiting`: each of their settlements wakes
 *   it for another run, and a send or resume starts one at once. A one-shot
 *   child never waits (its one result is final), nor does a chain that was
 *   stopped (close, a parking interrupt, a budget, a drain from above,
 *   disposal).
 * - A chain that ends drains the child's own running children, writes the
 *   final `closed` end if it was closed, and goes cold when persistence is
 *   present.
 */

/** What a `message` run delivers: a queued message (its `subagent/queued` seq) or a wake-up notice (its `subagent/notice` seq). */
export type Delivery = { readonly queued: number } | { readonly notice: number }

/** Starts one run of `child` (its first, or the next in its chain) and returns its handle at once. */
export function startChild(
  core: RuntimeCore,
  sessions: SessionStore,
  child: Session,
  kind: SubagentRunKind,
  identity: SubagentIdentityProjection,
  profile: ChildProfile,
  prompt: string | undefined,
  delivery?: Delivery,
  inbox: QueuedInput[] = [],
): SubagentHandle {
  let state = core.busy.get(child.id)
  if (state !== undefined) {
    state.waiting = false
    state.inbox.push(...inbox)
  } else {
    let resolve!: () => void
    const idle = new Promise<void>((settle) => (resolve = settle))
    const waiters = new Set<() => void>()
    const resolveIdle = (): void => {
      resolve()
      for (const waiter of waiters) waiter()
      waiters.clear()
    }
    state = { session: child, inbox, wakes: [], idle, resolveIdle, waiters, identity, profile }
    core.busy.set(child.id, state)
  }
  const controller = new AbortController()
  const turn = child.nextTurn()
  // A run under a budget with nothing left (or no turn to give) starts and
  // ends `budget` at once, without calling the driver.
  const ledger = ledgerFor(core, child, profile.settings)
  const refused = admitRun(core, ledger)
  core.services.emit?.('subagent/run-start', child, { kind, turn })
  child.append(SUBAGENT_START_EVENT, { kind, turn, ...delivery })
  if (prompt !== undefined) child.append('user/message', { text: prompt })
  // The tool provider is the host's code: a throw from it ends this run
  // `error` (logged and noticed like a driver's throw) instead of leaving
  // the child busy with a run that never started.
  let tools: readonly SubagentTool[] = []
  let unready: { error: unknown } | undefined
  try {
    tools = core.toolsFor(child, profile.settings.toolFilter)
  } catch (error) {
    unready = { error }
  }
  const run: SubagentRun = {
    kind,
    session: child,
    identity,
    turn,
    notices: noticesSinceLastTurn(child),
    tools,
    signal: controller.signal,
    settings: profile.settings,
    ...(profile.descriptor === undefined ? {} : { descriptor: profile.descriptor }),
    ...(prompt === undefined ? {} : { prompt }),
  }
  const active: ActiveRun = { session: child, controller, done: undefined as never }
  if (refused !== undefined) {
    active.endReason = 'budget'
    active.exceeded = refused
    state.stop ??= 'park'
  }
  const chain = state
  const done = (async (): Promise<SubagentSettlement> => {
    // Let the caller see the handle (and a live child) before the first step.
    await Promise.resolve()
    const outcome: SubagentRunOutcome =
      refused !== undefined ? { reason: 'cancelled' } : unready !== undefined ? { reason: 'error', ...unready } : await runDriver(core, run)
    clearTimeout(active.wallTimer)
    let settlement: SubagentSettlement
    try {
      // A one-shot result with an outputSchema is checked (the checks are loaded already when this runtime spawned the child).
      const checks =
        needsOutputCheck(identity, profile) && active.endReason === undefined
          ? (loadedOutputChecks() ?? (await loadOutputChecks()))
          : undefined
      settlement = finishRun(core, child, turn, chain, outcome, active.endReason, checks, active.exceeded)
    } catch (error) {
      // An outcome the log cannot hold (a driver's text or reason that is not
      // JSON) still ends the run: as `error`, with why, so the child never
      // stays busy and `done` never rejects.
      core.warn(`dsh: subagent '${child.id}' ended with an outcome its log cannot record; it is logged as an error.`, error)
      settlement = finishRun(core, child, turn, chain, { reason: 'error', error }, undefined, undefined, undefined)
    }
    core.runs.delete(child.id)
    // The notices this run's last model call read need no run of their own.
    const read = lastRequestBoundary(child)
    chain.wakes.splice(0, chain.wakes.length, ...chain.wakes.filter((seq) => seq > read))
    await continueChain(core, sessions, child, chain)
    return settlement
  })()
  ;(active as { done: Promise<SubagentSettlement> }).done = done
  core.runs.set(child.id, active)
  if (refused === undefined) armWallTimer(core, ledger, active)
  return { id: child.id, session: child, done }
}

/** Runs the driver; a throw becomes an `error` outcome and an open turn is closed. */
export async function runDriver(core: RuntimeCore, run: SubagentRun): Promise<SubagentRunOutcome> {
  let outcome: SubagentRunOutcome
  try {
    outcome = await core.driver.run(run)
  } catch (error) {
    outcome = { reason: 'error', error }
  }
  const session = run.session
  // A driver that failed mid-turn must not leave the turn open in the log.
  const open = session.closed ? undefined : session.openTurnBefore()
  if (open !== undefined) session.append('turn/end', { turn: open, reason: outcome.reason === 'completed' ? 'error' : outcome.reason })
  return outcome
}

function needsOutputCheck(identity: SubagentIdentityProjection, profile: ChildProfile): boolean {
  return identity.mode === 'one-shot' && profile.settings.outputSchema !== undefined
}

/** Logs the run's end on the child and the settlement notice on its parent (which wakes a busy parent). */
function finishRun(
  core: RuntimeCore,
  child: Session,
  turn: number,
  chain: BusyChild,
  outcome: SubagentRunOutcome,
  override: SubagentEndReason | undefined,
  checks: OutputChecks | undefined,
  exceeded: SubagentBudgetExceeded | undefined,
): SubagentSettlement {
  const { identity, profile } = chain
  let settled: SubagentRunOutcome = outcome
  let end: SubagentEndReason = override ?? outcome.reason
  const budget = budgetRecord(core, child.id, end === 'budget' ? exceeded : undefined)
  if (budget.error !== undefined) settled = { ...outcome, error: budget.error }
  const outputSchema = profile.settings.outputSchema
  if (override === undefined && outcome.reason === 'completed' && checks !== undefined && outputSchema !== undefined) {
    const checked = checks.checkOutput(outputSchema, outcome.text)
    if ('error' in checked) {
      end = 'invalid-output'
      settled = { ...outcome, error: checked.error }
    } else settled = { ...outcome, output: checked.output }
  }
  const error = settled.error === undefined || end === 'completed' ? undefined : boundedRunError(describeError(settled.error))
  const data: SubagentEndData = {
    turn,
    reason: end,
    ...(settled.text === undefined ? {} : { text: settled.text }),
    ...(error === undefined ? {} : { error }),
    ...(settled.output === undefined ? {} : { output: settled.output as never }),
    ...(budget.spent === undefined ? {} : { spent: budget.spent }),
    ...(budget.exceeded === undefined ? {} : { exceeded: budget.exceeded }),
  }
  if (!child.closed) child.append(SUBAGENT_END_EVENT, data)
  const { turn: _turn, ...entry } = data
  core.remember({ id: child.id, state: 'settled', ...entry })
  const parentId = child.header.parentSession
  if (parentId !== undefined) {
    const notice: SubagentNotice = {
      kind: 'settled',
      child: child.id,
      mode: identity.mode,
      ...(identity.label === undefined ? {} : { label: identity.label }),
      reason: end,
      ...(settled.text === undefined ? {} : { text: settled.text }),
      ...(error === undefined ? {} : { error }),
      ...(budget.exceeded === undefined ? {} : { exceeded: budget.exceeded }),
      ...(willWait(core, child, chain) ? { waiting: true as const } : {}),
    }
    const parent = core.services.get('sessions')?.get(parentId)
    if (parent !== undefined && !parent.closed) wake(core, parent, parent.append(SUBAGENT_NOTICE_EVENT, notice).seq)
    else if (end !== 'drained')
      core.warn(`dsh: subagent '${child.id}' settled (${end}) while its parent '${parentId}' was not live; its own log records the end.`)
  }
  return { ...settled, end, ...(budget.exceeded === undefined ? {} : { exceeded: budget.exceeded }) }
}

/** True when `child`'s chain, not stopped, would wait for subagents of its own after this run: a continuable child with some running. */
function willWait(core: RuntimeCore, child: Session, chain: BusyChild): boolean {
  return (
    chain.identity.mode === 'continuable' &&
    chain.stop === undefined &&
    !core.disposed &&
    !child.closed &&
    hasRunningChildren(core, child.id)
  )
}

/**
 * True while a subagent `parentId` started can still settle a run in this
 * process (running, queued or waiting itself); one whose chain is ending
 * settles nothing more.
 */
function hasRunningChildren(core: RuntimeCore, parentId: string): boolean {
  for (const state of core.busy.values()) if (state.session.header.parentSession === parentId && state.settling !== true) return true
  return false
}

/** A settlement notice logged on `parent`: when it is a busy child whose chain goes on, the notice is due to wake it. */
function wake(core: RuntimeCore, parent: Session, seq: number): void {
  const state = core.busy.get(parent.id)
  if (state === undefined || state.settling === true || state.stop !== undefined || core.disposed) return
  if (state.identity.mode !== 'continuable') return
  state.wakes.push(seq)
  if (state.waiting === true) resumeWaiting(core, state)
}

/** Goes on with a `waiting` child's chain (its next run, or its end when it was stopped or has nothing left to wait for). */
export function resumeWaiting(core: RuntimeCore, state: BusyChild): void {
  if (state.waiting !== true) return
  state.waiting = false
  continueChain(core, core.sessions(), state.session, state).catch((error: unknown) =>
    core.warn(`dsh: subagent '${state.session.id}' could not go on after waiting for its subagents.`, error),
  )
}

/**
 * After a run (or a wake of a waiting child): start the next input, oldest
 * first; or wait for the child's own running subagents; or end the chain —
 * drain, write a final close, go cold.
 */
async function continueChain(core: RuntimeCore, sessions: SessionStore, child: Session, state: BusyChild): Promise<void> {
  const goesOn = state.stop === undefined && !core.disposed && !child.closed
  if (goesOn) {
    const message = state.inbox[0]
    const notice = state.wakes[0]
    if (notice !== undefined && (message === undefined || notice < message.seq)) {
      state.wakes.shift()
      startChild(core, sessions, child, 'message', state.identity, state.profile, undefined, { notice })
      return
    }
    if (message !== undefined) {
      state.inbox.shift()
      startChild(core, sessions, child, 'message', state.identity, state.profile, message.text, { queued: message.seq })
      return
    }
    if (state.identity.mode === 'continuable' && hasRunningChildren(core, child.id)) {
      state.waiting = true
      return
    }
  }
  state.settling = true
  try {
    await drain(core, child.id)
    if (state.stop === 'close' && !child.closed) {
      const dropped = state.inbox.length
      child.append(SUBAGENT_END_EVENT, { reason: 'closed', ...(dropped > 0 ? { dropped } : {}) })
      core.forget(child.id)
    }
    await settle(core, sessions, child)
  } finally {
    core.busy.delete(child.id)
    state.resolveIdle()
    // A parent waiting for its subagents ends its chain once the last of them has.
    const parentId = child.header.parentSession
    const parent = parentId === undefined ? undefined : core.busy.get(parentId)
    if (parent?.waiting === true && !hasRunningChildren(core, parentId!)) resumeWaiting(core, parent)
  }
}

/** A child whose runs are over goes cold (out of memory) when persistence keeps it; otherwise it stays live. */
export async function settle(core: RuntimeCore, sessions: SessionStore, child: Session): Promise<void> {
  if (core.services.get('sessionPersistence') === undefined || child.closed) return
  try {
    await sessions.dispose(child.id)
    // A cold child's counter is rebuilt from its log when it runs again.
    core.ledgers.delete(child.id)
  } catch (error) {
    // The child stays live and its events stay queued for retry; nothing is lost.
    core.warn(`dsh: subagent '${child.id}' could not go cold after its run; it stays live.`, error)
  }
}

/**
 * Drains the busy children of `parentId` (their runs end `drained`, queued
 * input stays logged for a later resume, one waiting for subagents of its own
 * drains them and ends its chain) and waits for them. Their settlement
 * notices land on the parent while it is still live.
 */
export async function drain(core: RuntimeCore, parentId: string): Promise<void> {
  const waits: Promise<void>[] = []
  for (const [id, state] of [...core.busy]) {
    if (state.session.header.parentSession !== parentId) continue
    state.stop ??= 'drain'
    const run = core.runs.get(id)
    if (run !== undefined) {
      // A run a budget stopped already says why.
      run.endReason ??= 'drained'
      run.controller.abort()
    }
    waits.push(state.idle)
    resumeWaiting(core, state)
  }
  await Promise.all(waits)
}
