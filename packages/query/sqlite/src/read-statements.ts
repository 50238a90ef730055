import type { SessionQueryRecord } from '@dsh/session-query'
import type { ParsedListFilter } from '@dsh/session-query/backend'
import { type ListedRow, toRecord } from './index-store.js'

/**
 * A request-serving read: SQL and its parameters, plain data so that it can
 * run on the main connection or be posted to the reader worker alike. Every
 * statement here calls `dsh_budget(<a column>)` once per candidate row, which
 * is how the budget (time and rows stepped) is enforced while SQLite works.
 */
export interface ReadStatement {
  readonly sql: string
  readonly params: readonly unknown[]
}

/**
 * Persisted rows matching `filter` in listing order after its cursor, at most
 * `fetch` of them (all when undefined), leaving out the rows of `exclude`
 * (sessions whose row is not current: the caller lists them from their
 * logs). Uses the (parent|origin|cwd|created_at, created_at, id) indexes;
 * the children of several parents always read through the parent index.
 */
export function listStatement(filter: ParsedListFilter, fetch: number | undefined, exclude: readonly string[] = []): ReadStatement {
  const where = ['revision IS NOT NULL', 'dsh_budget(sid)']
  const params: unknown[] = []
  const and = (condition: string, ...values: unknown[]): void => {
    where.push(condition)
    params.push(...values)
  }
  if (filter.parentSession !== undefined) and('parent = ?', filter.parentSession)
  // One placeholder per parent (at most MAX_PAGE_SIZE): an IN list is a run of parent-index lookups.
  // The index is named (below): without statistics the planner would take the origin index
  // for its order and step through every subagent of the store.
  if (filter.parentSessions !== undefined)
    and(`parent IN (${[...filter.parentSessions].map(() => '?').join(', ')})`, ...filter.parentSessions)
  // One placeholder per id (at most MAX_PAGE_SIZE): lookups on the id's unique index.
  if (filter.ids !== undefined) and(`id IN (${[...filter.ids].map(() => '?').join(', ')})`, ...filter.ids)
  if (filter.origin !== undefined) and('origin = ?', filter.origin)
  if (filter.cwd !== undefined) and('cwd = ?', filter.cwd)
  if (filter.createdFrom !== undefined) and('created_at >= ?', filter.createdFrom)
  if (filter.createdTo !== undefined) and('created_at <= ?', filter.createdTo)
  if (filter.after !== undefined) and('(created_at, id) > (?, ?)', filter.after.createdAt, filter.after.id)
  if (exclude.length > 0) and('id NOT IN (SELECT value FROM json_each(?))', JSON.stringify(exclude))
  if (fetch !== undefined) params.push(fetch)
  return {
    sql: `SELECT id, header, inherited, revision, crc FROM sessions${filter.parentSessions === undefined ? '' : ' INDEXED BY sessions_by_parent'} WHERE ${where.join(' AND ')} ORDER BY created_at, id${fetch === undefined ? '' : ' LIMIT ?'}`,
    params,
  }
}

/** Checks and decodes listed rows (a row failing its checksum throws `IndexDamageError`). */
export function listedRecords(rows: readonly unknown[]): SessionQueryRecord[] {
  return (rows as ListedRow[]).map(toRecord)
}
