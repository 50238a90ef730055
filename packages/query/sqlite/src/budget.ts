import { queryError } from '@dsh/session-query/backend'
import type Database from 'better-sqlite3'
import type { ReadStatement } from './read-statements.js'

/**
 * What one request may spend in SQLite: wall time and candidate rows
 * stepped (`rows` is unbounded unless set). better-sqlite3 has no progress
 * handler, so the statements call `dsh_budget(...)` once per candidate row;
 * past the budget it throws and SQLite abandons the statement.
 */
export interface StatementBudget {
  readonly ms: number
  readonly rows?: number
}

export const DEFAULT_BUDGET: StatementBudget = { ms: 5_000 }

/** Rows of each statement, or the news that the budget ran out; `stepped` counts `dsh_budget` calls. */
export type BudgetedResult =
  | { readonly rows: unknown[][]; readonly stepped: number }
  | { readonly exceeded: true; readonly stepped: number }

/**
 * Installs `dsh_budget` on `db` and returns a runner of read statements (in
 * one read transaction, so a search and the generation stamping it agree).
 *
 * Self-contained on purpose — no imports, no module-level references: the
 * worker mode evaluates this function's own source inside a worker thread,
 * so the main thread and the worker enforce budgets with one piece of code.
 */
export function createBudgetedReader(db: Database.Database): {
  run(statements: readonly ReadStatement[], budget: StatementBudget): BudgetedResult
} {
  const exceeded = 'dsh: statement budget exceeded'
  let deadline = 0
  let rowLimit = 0
  let stepped = 0
  db.function('dsh_budget', { deterministic: false, varargs: true }, () => {
    stepped++
    if (stepped > rowLimit || Date.now() >= deadline) throw new Error(exceeded)
    return 1
  })
  const prepared = new Map<string, Database.Statement>()
  const readAll = db.transaction((statements: readonly ReadStatement[]) =>
    statements.map(({ sql, params }) => {
      let statement = prepared.get(sql)
      if (statement === undefined) {
        statement = db.prepare(sql)
        prepared.set(sql, statement)
      }
      return statement.all(...params)
    }),
  )
  return {
    run(statements, budget) {
      stepped = 0
      deadline = Date.now() + budget.ms
      rowLimit = budget.rows ?? Number.POSITIVE_INFINITY
      try {
        return { rows: readAll(statements), stepped }
      } catch (error) {
        if (error instanceof Error && error.message.includes(exceeded)) return { exceeded: true, stepped }
        throw error
      } finally {
        deadline = 0
      }
    },
  }
}

/** `SESSION_QUERY_BUDGET_EXCEEDED` for a `what` (a listing, a search) stopped after `stepped` candidate rows. */
export function budgetExceeded(what: 'listing' | 'search', stepped: number, budget: StatementBudget): Error {
  const rows = budget.rows === undefined ? '' : ` or ${budget.rows} rows`
  return queryError(
    'SESSION_QUERY_BUDGET_EXCEEDED',
    `The ${what} was stopped after ${stepped} candidate rows: it exceeded its budget of ${budget.ms} ms${rows}. Narrow it (fewer or rarer words, a smaller page) or try again later.`,
    { details: { stepped, budgetMs: budget.ms, ...(budget.rows === undefined ? {} : { budgetRows: budget.rows }) } },
  )
}
