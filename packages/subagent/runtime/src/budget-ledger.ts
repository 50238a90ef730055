import type { SubagentBudget, SubagentBudgetExceeded, SubagentBudgetKind, SubagentBudgetSpent } from './budget.js'

/**
 * One budgeted child's counter, linked to the counter of its nearest
 * budgeted ancestor: one shared counter per tree. A step or a turn of any
 * session is charged to its own ledger and to every ledger above it, so
 * siblings running at once spend from one figure and cannot overspend
 * together: the step that takes a shared figure past its limit stops every
 * run below that ledger.
 *
 * Invariants: figures only grow; `tokens` and `turns` are non-negative
 * integers; `costUsd` is a finite sum of priced steps, and `unpriced` is set
 * for good once a step could not be priced while a cost limit applied.
 */
export class BudgetLedger {
  /** The session this ledger counts for (it and its descendants). */
  readonly session: string
  readonly parent: BudgetLedger | undefined
  /** Its own limits; `deadline` is on the runtime's clock. */
  readonly limits: Readonly<{ tokens?: number; costUsd?: number; turns?: number; wallMs?: number; deadline?: number }>
  /** When the child was spawned, on the runtime's clock. */
  readonly startedAt: number
  /** The provider and model a step is priced by when its `step/start` names none. */
  readonly defaultModel: { readonly provider: string | null; readonly model: string | null }
  tokens = 0
  costUsd = 0
  unpriced: string | undefined
  turns = 0
  /** The attribution of the step in progress, from its `step/start`. */
  step: { provider: string | null; model: string | null } | undefined

  constructor(init: {
    session: string
    parent: BudgetLedger | undefined
    budget: SubagentBudget
    startedAt: number
    defaultModel: { provider: string | null; model: string | null }
    spent?: Partial<SubagentBudgetSpent> | undefined
  }) {
    const { budget, startedAt } = init
    this.session = init.session
    this.parent = init.parent
    this.startedAt = startedAt
    this.defaultModel = init.defaultModel
    this.limits = Object.freeze({
      ...(budget.maxTokens === undefined ? {} : { tokens: budget.maxTokens }),
      ...(budget.maxCostUsd === undefined ? {} : { costUsd: budget.maxCostUsd }),
      ...(budget.maxTurns === undefined ? {} : { turns: budget.maxTurns }),
      ...(budget.maxWallMs === undefined ? {} : { wallMs: budget.maxWallMs, deadline: startedAt + budget.maxWallMs }),
    })
    const spent = init.spent
    if (spent !== undefined) {
      if (isCount(spent.tokens)) this.tokens = spent.tokens
      if (isCount(spent.turns)) this.turns = spent.turns
      if (typeof spent.costUsd === 'number' && Number.isFinite(spent.costUsd) && spent.costUsd >= 0) this.costUsd = spent.costUsd
    }
  }

  /** This ledger, then each budgeted ancestor's, innermost first. */
  *chain(): Generator<BudgetLedger> {
    for (let ledger: BudgetLedger | undefined = this; ledger !== undefined; ledger = ledger.parent) yield ledger
  }

  /** True when this ledger or one above it counts for `session`. */
  sharesWith(session: string): boolean {
    for (const ledger of this.chain()) if (ledger.session === session) return true
    return false
  }

  /** True when a cost limit applies here or above (the steps must then be priced). */
  costLimited(): boolean {
    for (const ledger of this.chain()) if (ledger.limits.costUsd !== undefined) return true
    return false
  }

  hasLimits(): boolean {
    return Object.keys(this.limits).length > 0
  }

  /** One step's usage, charged here and above. `costUsd` is `null` when the step could not be priced (`reason` says why). */
  chargeStep(tokens: number, costUsd: number | null, reason: string | undefined): void {
    for (const ledger of this.chain()) {
      ledger.tokens += tokens
      if (costUsd === null) ledger.unpriced ??= reason ?? 'unknown-model'
      else ledger.costUsd += costUsd
    }
  }

  chargeTurn(): void {
    for (const ledger of this.chain()) ledger.turns += 1
  }

  /**
   * The budgets crossed here or above, innermost first, at a moment of a
   * run: `step-end` (a step was charged): a figure above its limit;
   * `step-start` and `run-start` (something is about to be spent): a figure
   * at its limit too, since nothing is left — turns only at `run-start`,
   * since a step spends no turn. A cost limit with an unpriced step is
   * crossed at any moment: it fails closed. Wall time is crossed once the
   * clock reaches the deadline.
   */
  crossed(now: number, at: 'run-start' | 'step-start' | 'step-end'): SubagentBudgetExceeded[] {
    const out: SubagentBudgetExceeded[] = []
    const strict = at === 'step-end'
    const over = (spent: number, limit: number): boolean => (strict ? spent > limit : spent >= limit)
    for (const ledger of this.chain()) {
      const { tokens, costUsd, turns, deadline, wallMs } = ledger.limits
      const add = (kind: SubagentBudgetKind, limit: number, spent: number, unpriced?: string): void =>
        void out.push({ kind, session: ledger.session, limit, spent, ...(unpriced === undefined ? {} : { unpriced }) })
      if (tokens !== undefined && over(ledger.tokens, tokens)) add('tokens', tokens, ledger.tokens)
      if (costUsd !== undefined && ledger.unpriced !== undefined) add('cost', costUsd, ledger.costUsd, ledger.unpriced)
      else if (costUsd !== undefined && over(ledger.costUsd, costUsd)) add('cost', costUsd, ledger.costUsd)
      if (turns !== undefined && (at === 'run-start' ? ledger.turns >= turns : ledger.turns > turns)) add('turns', turns, ledger.turns)
      if (deadline !== undefined && wallMs !== undefined && now >= deadline) add('wall', wallMs, now - ledger.startedAt)
    }
    return out
  }

  /**
   * What a new child of this ledger's session may spend at most: the least
   * remainder of each kind over the chain (`undefined` where no limit
   * applies). A remainder may be 0 or below: nothing is left.
   */
  remainder(now: number): { tokens?: number; costUsd?: number; turns?: number; wallMs?: number } {
    let tokens: number | undefined
    let costUsd: number | undefined
    let turns: number | undefined
    let wallMs: number | undefined
    const least = (current: number | undefined, next: number): number => (current === undefined ? next : Math.min(current, next))
    for (const ledger of this.chain()) {
      const limits = ledger.limits
      if (limits.tokens !== undefined) tokens = least(tokens, limits.tokens - ledger.tokens)
      if (limits.costUsd !== undefined) costUsd = least(costUsd, ledger.unpriced === undefined ? limits.costUsd - ledger.costUsd : 0)
      if (limits.turns !== undefined) turns = least(turns, limits.turns - ledger.turns)
      if (limits.deadline !== undefined) wallMs = least(wallMs, limits.deadline - now)
    }
    return {
      ...(tokens === undefined ? {} : { tokens }),
      ...(costUsd === undefined ? {} : { costUsd }),
      ...(turns === undefined ? {} : { turns }),
      ...(wallMs === undefined ? {} : { wallMs }),
    }
  }

  /** The figures of this ledger (the child and its descendants). */
  spent(now: number): SubagentBudgetSpent {
    return {
      tokens: this.tokens,
      costUsd: this.unpriced === undefined ? this.costUsd : null,
      turns: this.turns,
      wallMs: Math.max(0, now - this.startedAt),
    }
  }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}
