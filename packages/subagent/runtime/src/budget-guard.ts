import type { Session, SessionEvent, StoredSessionEvent } from '@dsh/session'
import {
  budgetOf,
  SUBAGENT_BUDGET_KEYS,
  SUBAGENT_BUDGET_KIND_OF,
  type SubagentBudget,
  type SubagentBudgetExceeded,
  type SubagentPricedStep,
  type SubagentStepPricer,
} from './budget.js'
import { BudgetLedger } from './budget-ledger.js'
import type { ActiveRun, RuntimeCore } from './core.js'
import { SubagentError } from './errors.js'
import { SUBAGENT_END_EVENT, type SubagentEndData } from './lifecycle.js'
import type { SubagentSettings } from './options.js'

/**
 * Budgets at work: what a spawn may ask for, the counters of running
 * children, and the stop when one is crossed.
 *
 * Invariants:
 * - A child's budget is at most its parent's remainder: a request above it
 *   is clamped to it (the clamped figure is what `subagent/options`
 *   records), and a spawn under a budget with nothing left is refused
 *   (`SUBAGENT_BUDGET_EXHAUSTED`).
 * - A cost budget fails closed: without a price table, or with a child
 *   whose provider and model the table does not price, the spawn is refused
 *   (`SUBAGENT_BUDGET_UNPRICED`) before the child exists; a step whose
 *   model has no price ends the child `budget` with `unpriced`.
 * - The runtime counts from the child's log as it is written: each
 *   `step/end` is charged the moment it is appended, and a crossing aborts
 *   every run below the crossed ledger there and then, so no further step of
 *   theirs starts (a step already in flight ends aborted).
 */

type TokenCounts = SubagentPricedStep['tokens']
type Priced = ReturnType<SubagentStepPricer>

const NO_TOKENS: TokenCounts = Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 })

/** One step's cost through the runtime's pricing; without one the cost is unknown. */
function priceOf(pricing: SubagentStepPricer | undefined, provider: string | null, model: string | null, tokens: TokenCounts): Priced {
  if (pricing === undefined) return { usd: null, reason: 'no-price-table' }
  const priced = pricing({ provider, model, tokens })
  return priced.usd !== null && Number.isFinite(priced.usd) && priced.usd >= 0
    ? { usd: priced.usd }
    : { usd: null, reason: priced.reason ?? 'invalid-price' }
}

/** The provider and model a child's steps run on when their `step/start` names none: its settings, else the driver's. */
function modelOf(core: RuntimeCore, settings: SubagentSettings): { provider: string | null; model: string | null } {
  return {
    provider: core.driver.model?.provider ?? settings.agentProvider ?? null,
    model: settings.model ?? settings.agentModel ?? core.driver.model?.model ?? null,
  }
}

/**
 * The settings a spawn records, with its budget clamped to the parent's
 * remainder, and the ledger to give the child (`undefined` when no budget
 * applies to it). Throws before the child exists.
 */
export function planBudget(
  core: RuntimeCore,
  parent: Session,
  settings: SubagentSettings,
): { settings: SubagentSettings; ledger: ((childId: string) => BudgetLedger) | undefined } {
  const requested = budgetOf(settings)
  const parentLedger = core.ledgers.get(parent.id)
  if (parentLedger === undefined && Object.keys(requested).length === 0) return { settings, ledger: undefined }
  if (!core.budgetsObserved) {
    throw new SubagentError(
      'SUBAGENT_BUDGET_UNENFORCEABLE',
      "Cannot spawn a child with a budget: this runtime does not see its children's events (its service source has no 'on'; activate it with subagentsPlugin).",
    )
  }
  const now = core.clock()
  const remainder = parentLedger?.remainder(now) ?? {}
  const limits: Record<string, number> = { ...requested }
  for (const key of SUBAGENT_BUDGET_KEYS) {
    const kind = SUBAGENT_BUDGET_KIND_OF[key]
    const left =
      kind === 'tokens' ? remainder.tokens : kind === 'cost' ? remainder.costUsd : kind === 'turns' ? remainder.turns : remainder.wallMs
    if (left === undefined) continue
    // Tokens, turns and milliseconds are whole: less than one left is nothing left.
    const cap = kind === 'cost' ? left : Math.floor(left)
    if (cap <= 0) {
      throw new SubagentError(
        'SUBAGENT_BUDGET_EXHAUSTED',
        `Cannot spawn: the ${kind} budget this child would share with '${parent.id}' is used up; finish with what you have.`,
        { details: { parent: parent.id, kind } },
      )
    }
    const asked = limits[key]
    if (asked !== undefined && asked > cap) limits[key] = cap
  }
  const budget = limits as SubagentBudget
  const defaultModel = modelOf(core, settings)
  if (budget.maxCostUsd !== undefined || parentLedger?.costLimited() === true) refuseUnpriced(core.pricing, defaultModel)
  const clamped = Object.freeze({ ...settings, ...budget }) as SubagentSettings
  return {
    settings: clamped,
    ledger: (childId) => new BudgetLedger({ session: childId, parent: parentLedger, budget, startedAt: now, defaultModel }),
  }
}

function refuseUnpriced(table: SubagentStepPricer | undefined, at: { provider: string | null; model: string | null }): void {
  if (table === undefined) {
    throw new SubagentError(
      'SUBAGENT_BUDGET_UNPRICED',
      'Cannot spawn a child with a cost budget: this runtime has no price table to count cost with (give the host a price table: createHost({ prices })).',
      { details: { reason: 'no-price-table' } },
    )
  }
  const priced = priceOf(table, at.provider, at.model, NO_TOKENS)
  if (priced.usd === null) {
    const what = at.model === null ? 'a child whose model is not named' : `model '${at.model}' of provider '${String(at.provider)}'`
    throw new SubagentError(
      'SUBAGENT_BUDGET_UNPRICED',
      `Cannot spawn a child with a cost budget: the price table has no price for ${what} (${priced.reason}); add it to the table or drop the cost budget.`,
      { details: { provider: at.provider, model: at.model, reason: priced.reason } },
    )
  }
}

/** A child's log as a live session or an observation of it holds it: enough to rebuild its ledger. */
export interface LoggedChild {
  readonly header: Pick<Session['header'], 'id' | 'parentSession' | 'createdAt'>
  readonly events: readonly StoredSessionEvent[]
  readonly inheritedEventCount: number
}

/**
 * The ledger of a child about to run: the one its spawn made, else (a
 * resumed child) one rebuilt from its settings and the figures its last
 * `subagent/end` recorded; `undefined` when no budget applies to it.
 */
export function ledgerFor(core: RuntimeCore, child: Session, settings: SubagentSettings): BudgetLedger | undefined {
  const known = core.ledgers.get(child.id)
  if (known !== undefined) return known
  const ledger = rebuiltLedger(core, child, settings)
  if (ledger !== undefined) core.ledgers.set(child.id, ledger)
  return ledger
}

/** A ledger built from the child's settings and the figures its last `subagent/end` recorded, kept nowhere. */
function rebuiltLedger(core: RuntimeCore, child: LoggedChild, settings: SubagentSettings): BudgetLedger | undefined {
  const budget = budgetOf(settings)
  const parentId = child.header.parentSession
  const parent = parentId === undefined ? undefined : core.ledgers.get(parentId)
  if (parent === undefined && Object.keys(budget).length === 0) return undefined
  return new BudgetLedger({
    session: child.header.id,
    parent,
    budget,
    startedAt: child.header.createdAt,
    defaultModel: modelOf(core, settings),
    spent: lastSpent(child.events, child.inheritedEventCount),
  })
}

/**
 * Refuses input for a child whose next run `admitRun` would not admit (a
 * budget of its own or of an ancestor it shares has nothing left, or no turn
 * to give): `SUBAGENT_BUDGET_EXCEEDED`, stating the budget and what was
 * spent. Figures only grow, so such a run can never start; a send or resume
 * is refused with it before anything is written to the child, instead of a
 * run that starts and ends `budget` at once with its input unread. Reads the
 * ledger the runtime keeps for the child, else rebuilds one from `child`'s
 * log without keeping it; charges nothing.
 */
export function refuseSpentBudget(core: RuntimeCore, child: LoggedChild, settings: SubagentSettings): void {
  const ledger = core.ledgers.get(child.header.id) ?? rebuiltLedger(core, child, settings)
  const exceeded = ledger?.crossed(core.clock(), 'run-start')[0]
  if (exceeded === undefined) return
  const whose = exceeded.session === child.header.id ? 'its' : `the shared`
  const what =
    exceeded.unpriced === undefined
      ? `${whose} ${exceeded.kind} budget (${exceeded.limit}${UNITS[exceeded.kind]}) is used up (${exceeded.spent}${UNITS[exceeded.kind]} spent${exceeded.session === child.header.id ? '' : ` by '${exceeded.session}' and its subagents`})`
      : `${whose} cost budget (${exceeded.limit} USD) cannot be counted, because a step's model has no price (${exceeded.unpriced})`
  throw new SubagentError(
    'SUBAGENT_BUDGET_EXCEEDED',
    `Subagent '${child.header.id}' cannot take another turn: ${what}. Nothing was sent; start a new subagent or finish with what you have.`,
    { details: { ...exceeded } },
  )
}

/** The budget figures of the child's last own `subagent/end`, if it recorded any. */
function lastSpent(events: readonly StoredSessionEvent[], cut: number): SubagentEndData['spent'] {
  for (let i = events.length - 1; i >= cut; i--) {
    const event = events[i]!
    if (event.type === SUBAGENT_END_EVENT) {
      const spent = (event.data as SubagentEndData | null)?.spent
      if (spent !== undefined && spent !== null && typeof spent === 'object') return spent
    }
  }
  return undefined
}

/**
 * Whether a run may start: every ledger above it has something left and a
 * turn to give. A run that may starts charges its turn; one that may not
 * gets what was crossed (it then ends `budget` without calling the driver).
 */
export function admitRun(core: RuntimeCore, ledger: BudgetLedger | undefined): SubagentBudgetExceeded | undefined {
  if (ledger === undefined) return undefined
  const crossed = ledger.crossed(core.clock(), 'run-start')
  if (crossed.length > 0) return crossed[0]
  ledger.chargeTurn()
  return undefined
}

/** Every event appended to a live session: the budgeted children's steps are charged and checked here. */
export function observeBudget(core: RuntimeCore, session: Session, event: SessionEvent): void {
  if (core.ledgers.size === 0) return
  const ledger = core.ledgers.get(session.id)
  if (ledger === undefined || !core.runs.has(session.id)) return
  const now = core.clock()
  if (event.type === 'step/start') {
    const data = event.data as { provider?: unknown; model?: unknown }
    ledger.step = {
      provider: typeof data.provider === 'string' ? data.provider : ledger.defaultModel.provider,
      model: typeof data.model === 'string' ? data.model : ledger.defaultModel.model,
    }
    stopCrossed(core, ledger.crossed(now, 'step-start'))
    return
  }
  if (event.type === 'step/end') {
    const tokens = tokensOf((event.data as { usage?: unknown }).usage)
    const at = ledger.step ?? ledger.defaultModel
    ledger.step = undefined
    const total = tokens.input + tokens.output + tokens.cacheRead + tokens.cacheWrite + tokens.reasoning
    // Without a price table the cost is unknown (null), never 0; with a cost limit that fails closed.
    const priced = priceOf(core.pricing, at.provider, at.model, tokens)
    ledger.chargeStep(total, priced.usd, priced.reason)
    stopCrossed(core, ledger.crossed(now, 'step-end'))
    return
  }
  stopCrossed(
    core,
    ledger.crossed(now, 'step-end').filter((crossed) => crossed.kind === 'wall'),
  )
}

/** A step's usage as disjoint counts; a kind that is not a non-negative integer counts 0. */
function tokensOf(usage: unknown): TokenCounts {
  if (usage === null || typeof usage !== 'object') return NO_TOKENS
  const read = (value: unknown): number => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0)
  const u = usage as Record<string, unknown>
  return {
    input: read(u.input),
    output: read(u.output),
    cacheRead: read(u.cacheRead),
    cacheWrite: read(u.cacheWrite),
    reasoning: read(u.reasoning),
  }
}

/**
 * Stops the runs below each crossed ledger, innermost first, so a child
 * that crossed its own budget reports its own figures and the siblings
 * sharing an ancestor's budget report the ancestor's. A stopped child's
 * queued input stays logged and undelivered (a parking stop).
 */
export function stopCrossed(core: RuntimeCore, crossed: readonly SubagentBudgetExceeded[]): void {
  for (const exceeded of crossed) {
    for (const [id, run] of core.runs) {
      if (run.endReason !== undefined || core.ledgers.get(id)?.sharesWith(exceeded.session) !== true) continue
      stopRun(core, id, run, exceeded)
    }
  }
}

function stopRun(core: RuntimeCore, id: string, run: ActiveRun, exceeded: SubagentBudgetExceeded): void {
  run.endReason = 'budget'
  run.exceeded = exceeded
  const state = core.busy.get(id)
  if (state !== undefined) state.stop ??= 'park'
  run.controller.abort()
}

/**
 * A real timer for the wall budget of a run that writes nothing (a model
 * call that hangs): it fires at the deadline by the clock and checks, and
 * arms again while the clock says the deadline is ahead. Tests advance an
 * injected clock and count events instead.
 */
export function armWallTimer(core: RuntimeCore, ledger: BudgetLedger | undefined, run: ActiveRun): void {
  const wall = ledger?.remainder(core.clock()).wallMs
  if (ledger === undefined || wall === undefined) return
  const arm = (ms: number): void => {
    run.wallTimer = setTimeout(
      () => {
        if (core.runs.get(run.session.id) !== run || run.endReason !== undefined) return
        const crossed = ledger.crossed(core.clock(), 'step-start').filter((c) => c.kind === 'wall')
        if (crossed.length > 0) stopCrossed(core, crossed)
        else arm(Math.max(1, ledger.remainder(core.clock()).wallMs ?? 1))
      },
      Math.max(1, Math.min(ms, 2 ** 31 - 1)),
    )
    run.wallTimer.unref?.()
  }
  arm(wall)
}

/** The figures a budgeted child's `subagent/end` records, and the error its parent reads on a `budget` end. */
export function budgetRecord(
  core: RuntimeCore,
  childId: string,
  exceeded: SubagentBudgetExceeded | undefined,
): Pick<SubagentEndData, 'spent' | 'exceeded'> & { error?: SubagentError } {
  const ledger = core.ledgers.get(childId)
  const spent = ledger?.spent(core.clock())
  return {
    ...(spent === undefined ? {} : { spent }),
    ...(exceeded === undefined ? {} : { exceeded, error: budgetError(exceeded) }),
  }
}

const UNITS = { tokens: ' tokens', cost: ' USD', wall: ' ms of wall time', turns: ' turns' } as const

export function budgetError(exceeded: SubagentBudgetExceeded): SubagentError {
  const whose = `the ${exceeded.kind} budget of '${exceeded.session}'`
  const message =
    exceeded.unpriced === undefined
      ? `Stopped: ${whose} (${exceeded.limit}${UNITS[exceeded.kind]}) was used up (${exceeded.spent}${UNITS[exceeded.kind]} spent).`
      : `Stopped: ${whose} (${exceeded.limit} USD) cannot be counted, because a step's model has no price (${exceeded.unpriced}); a cost budget fails closed.`
  return new SubagentError('SUBAGENT_BUDGET_EXCEEDED', message, { details: { ...exceeded } })
}
