import { isDshError, throwIfAborted } from '@dsh/context'
import { type Session, type SessionHeader, type SessionId, type SessionStore, sameLifecycle } from '@dsh/session'
import { refuseSpentBudget } from './budget-guard.js'
import { guardRead, ownIdentity, ownProfile, type RuntimeCore } from './core.js'
import { busy, cancelled, closed, notResumable, SubagentError } from './errors.js'
import { SUBAGENT_QUEUED_EVENT } from './lifecycle.js'
import { checkInputText } from './limits.js'
import { isClosed, pendingQueued } from './log-scan.js'
import { SUBAGENT_IDENTITY_KEY, SUBAGENT_PROFILE_KEY } from './projection.js'
import type { SubagentIdentityProjection } from './projection-types.js'
import { startChild } from './runs.js'
import type { CallerOptions, ResumeOptions, SendResult, SubagentHandle } from './runtime-types.js'

/**
 * `resume` and `send`: another run of a continuable child.
 *
 * Invariants:
 * - Only the child's live parent may resume it or send it input
 *   (`SUBAGENT_UNAUTHORIZED`), checked before anything is read that could
 *   change the child: a cold child is authorized and classified from a
 *   non-mutating inspection before `load` commits crash repair.
 * - Only a child whose own descriptor says continuable runs again
 *   (`SUBAGENT_NOT_RESUMABLE`); a closed child never does (`SUBAGENT_CLOSED`),
 *   nor one whose next run a budget would not admit
 *   (`SUBAGENT_BUDGET_EXCEEDED`): each is refused before anything is written
 *   to the child, so no input is logged that no run will read.
 * - Input sent to a busy child is logged (`subagent/queued`) before `send`
 *   returns and delivered in order, one run per message; a child waiting for
 *   subagents of its own is not busy: it takes the input at once. Input left
 *   undelivered — by a crash, a drain or a parking interrupt — is delivered
 *   first on the next send or resume, in order, before that call's own input.
 */
export async function resumeChild(
  core: RuntimeCore,
  childId: string,
  options: ResumeOptions,
  signal?: AbortSignal,
): Promise<SubagentHandle> {
  core.assertLive()
  core.assertWritable()
  checkInputText(options.prompt, 'prompt')
  throwIfAborted(signal, cancelled)
  const sessions = core.sessions()
  const projections = core.projections()
  const caller = core.liveCaller(sessions, options.caller, 'SUBAGENT_UNAUTHORIZED')
  const authorize = (header: SessionHeader): void => {
    if (header.origin !== 'subagent' || header.parentSession !== caller.id) {
      throw new SubagentError(
        'SUBAGENT_UNAUTHORIZED',
        `Session '${childId}' is not a subagent of '${caller.id}'; only its parent may resume it or send it input.`,
      )
    }
  }
  const state = core.busy.get(childId)
  if (state?.settling === true) await state.idle
  else if (state !== undefined && state.waiting !== true) {
    const live = sessions.get(childId)
    if (live !== undefined) authorize(live.header)
    throw busy(childId)
  }

  // A child waiting for subagents of its own is live and between runs: this run goes on with its chain.
  const live = sessions.get(childId)
  if (live !== undefined) {
    authorize(live.header)
    const identity = core.identityOf(live)
    if (identity?.mode !== 'continuable') throw notResumable(childId)
    if (isClosed(live.events, live.inheritedEventCount)) throw closed(childId)
    if (live.openTurnBefore() !== undefined) throw busy(childId)
    refuseSpentBudget(core, live, core.profileOf(live).settings)
    return resumeWith(core, sessions, live, identity, options.prompt, caller.id)
  }

  const persistence = core.persistence(childId)
  const observation = await guardRead(signal, () => persistence.inspect(childId as SessionId, signal), childId)
  authorize(observation.header)
  const folded = projections.fold(observation.events, { inheritedEventCount: observation.inheritedEventCount }, [
    SUBAGENT_IDENTITY_KEY,
    SUBAGENT_PROFILE_KEY,
  ])
  const count = observation.events.length
  const isOwn = (seq: number): boolean => seq >= observation.inheritedEventCount && seq < count
  const identity = ownIdentity(folded[SUBAGENT_IDENTITY_KEY], isOwn)
  if (identity?.mode !== 'continuable') throw notResumable(childId)
  if (isClosed(observation.events, observation.inheritedEventCount)) throw closed(childId)
  refuseSpentBudget(core, observation, ownProfile(folded[SUBAGENT_PROFILE_KEY], isOwn).settings)
  const loaded = await guardRead(signal, () => persistence.load(childId as SessionId, signal), childId)
  if (!sameLifecycle(loaded.header, observation.header)) {
    throw new SubagentError('SUBAGENT_NOT_FOUND', `Subagent '${childId}' was replaced while it was being resumed; list the catalog again.`)
  }
  throwIfAborted(signal, cancelled)
  if (sessions.get(childId) !== undefined || core.busy.has(childId)) throw busy(childId)
  const child = sessions.restore({ header: loaded.header, inheritedEventCount: loaded.inheritedEventCount, events: loaded.events })
  return resumeWith(core, sessions, child, identity, options.prompt, caller.id)
}

/** Starts the resumed child: input left undelivered (a crash, a drain, a parking interrupt) first, in order, then `prompt` behind it. */
function resumeWith(
  core: RuntimeCore,
  sessions: SessionStore,
  child: Session,
  identity: SubagentIdentityProjection,
  prompt: string | undefined,
  from: string,
): SubagentHandle {
  const profile = core.profileOf(child)
  const pending = pendingQueued(child.events, child.inheritedEventCount)
  if (pending.length === 0) return startChild(core, sessions, child, 'resume', identity, profile, prompt)
  if (prompt !== undefined) {
    const event = child.append(SUBAGENT_QUEUED_EVENT, { from, text: prompt })
    pending.push({ seq: event.seq, text: prompt })
  }
  const [first, ...rest] = pending
  return startChild(core, sessions, child, 'message', identity, profile, first!.text, { queued: first!.seq }, rest)
}

/**
 * Delivers `text` to a continuable child of the live `caller`: an idle child
 * starts a run at once; a busy one queues it — never an error.
 */
export async function sendToChild(
  core: RuntimeCore,
  childId: string,
  options: CallerOptions & { readonly text: string },
  signal?: AbortSignal,
): Promise<SendResult> {
  core.assertLive()
  core.assertWritable()
  checkInputText(options.text, 'message')
  const sessions = core.sessions()
  const caller = core.liveCaller(sessions, options.caller, 'SUBAGENT_UNAUTHORIZED')
  // Two messages racing to one cold child: the loser finds it busy and queues behind the winner.
  for (let attempt = 0; ; attempt++) {
    const queued = queueInput(core, sessions, caller, childId, options.text)
    if (queued !== undefined) return queued
    try {
      const handle = await resumeChild(core, childId, { caller, prompt: options.text }, signal)
      return { status: 'started', handle }
    } catch (error) {
      if (!isDshError(error, 'SUBAGENT_BUSY') || attempt >= 2) throw error
    }
  }
}

/** Queues `text` on a busy (not settling) child; `undefined` when the child is not busy. */
function queueInput(core: RuntimeCore, sessions: SessionStore, caller: Session, childId: string, text: string): SendResult | undefined {
  const state = core.busy.get(childId)
  const live = sessions.get(childId)
  if (state === undefined || state.settling === true || state.waiting === true || live === undefined) return undefined
  if (live.header.origin !== 'subagent' || live.header.parentSession !== caller.id) {
    throw new SubagentError(
      'SUBAGENT_UNAUTHORIZED',
      `Session '${childId}' is not a subagent of '${caller.id}'; only its parent may send it input.`,
    )
  }
  if (state.identity.mode !== 'continuable') throw notResumable(childId)
  if (state.stop === 'close') throw closed(childId)
  refuseSpentBudget(core, live, state.profile.settings)
  const event = live.append(SUBAGENT_QUEUED_EVENT, { from: caller.id, text })
  state.inbox.push({ seq: event.seq, text })
  // A message sent after a parking interrupt, before its run ended, wakes the
  // child: the chain goes on with the parked input first, then this.
  if (state.stop === 'park') delete state.stop
  return { status: 'queued', position: state.inbox.length }
}
