import { parseSessionHeader, type SessionHeader, SessionLogOffset } from '@dsh/session'
import { keyOf, revisionOf } from '@dsh/session-persistence-postgres/backend'
import type { SessionQueryRecord } from '@dsh/session-query'
import { matchesFilter, type ParsedListFilter } from '@dsh/session-query/backend'

/** A parameterised statement. */
export interface Statement {
  readonly text: string
  readonly values: unknown[]
}

/**
 * The listing statement for a parsed filter: only the conditions present, so
 * the planner picks the matching index — `(parent_key, created_at)` for a
 * parent's children (or for those of several parents), `(cwd_key, created_at)`, `(origin, created_at)` or
 * `(created_at)` — and sorts each run of equal `created_at` by id. `id` is the
 * UTF-8 bytes, so `bytea` order is code point order, the order every backend
 * lists in. The keyset position after `(c, i)` is written
 * `created_at >= c AND (created_at > c OR id > i)`: the first conjunct is an
 * index condition, so a page starts its scan at `c` instead of filtering
 * every row before it (no index holds `id`: an id may be longer than a
 * B-tree entry can be).
 */
export function listingStatement(filter: ParsedListFilter, limit: number | undefined): Statement {
  const where: string[] = []
  const values: unknown[] = []
  const param = (value: unknown): string => {
    values.push(value)
    return `$${values.length}`
  }
  if (filter.parentSession !== undefined) where.push(`parent_key = ${param(keyOf(filter.parentSession))}`)
  // `= ANY(array)` is a run of `(parent_key, created_at)` index lookups, one per parent.
  if (filter.parentSessions !== undefined) where.push(`parent_key = ANY(${param([...filter.parentSessions].map(keyOf))}::bytea[])`)
  // `= ANY(array)` on a key that leads with id_key (the primary key or the unique (id_key, sid)): one lookup per id.
  if (filter.ids !== undefined) where.push(`id_key = ANY(${param([...filter.ids].map(keyOf))}::bytea[])`)
  if (filter.origin !== undefined) where.push(`origin = ${param(filter.origin)}`)
  if (filter.cwd !== undefined) where.push(`cwd_key = ${param(keyOf(filter.cwd))}`)
  if (filter.createdFrom !== undefined) where.push(`created_at >= ${param(filter.createdFrom)}`)
  if (filter.createdTo !== undefined) where.push(`created_at <= ${param(filter.createdTo)}`)
  if (filter.after !== undefined) {
    const c = param(filter.after.createdAt)
    where.push(`created_at >= ${c} AND (created_at > ${c} OR id > ${param(Buffer.from(filter.after.id, 'utf8'))})`)
  }
  const text = `SELECT sid, header, inherited, next_seq FROM dsh_sessions${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY created_at, id${limit === undefined ? '' : ` LIMIT ${param(limit)}`}`
  return { text, values }
}

export interface ListingRow {
  sid: string
  header: string
  inherited: number
  next_seq: number
}

/**
 * A row as a persisted record. The key columns are SHA-256 digests, so the
 * parsed header is checked against the filter again: a row is listed only
 * when its own header matches.
 */
export function recordOf(row: ListingRow, filter: ParsedListFilter): SessionQueryRecord | undefined {
  let header: SessionHeader
  try {
    header = parseSessionHeader(JSON.parse(row.header))
  } catch {
    // A damaged header row is left out, as persistence's list() leaves it out (and reports it in damagedLogs()).
    return undefined
  }
  if (!matchesFilter(header, filter)) return undefined
  return Object.freeze({
    header,
    inheritedEventCount: SessionLogOffset(row.inherited),
    live: false,
    persisted: true,
    revision: revisionOf(row.sid, row.next_seq),
  })
}
