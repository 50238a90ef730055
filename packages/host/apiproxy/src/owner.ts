import { isDshError } from '@dsh/context'
import { PAGE_MAX_LIMIT } from '@dsh/protocol'
import type { SessionQuery } from '@dsh/session-query'
import type { ApiServices } from './services.js'

// Owner checks read headers only (a live session's, or listing records), never
// a log body: they run before any read of a session's data, so a refusal is
// the same whether that data is healthy, corrupt or unreadable.

/** True when the corpus lists `childId` among the subagent sessions whose parent is `parentId` (an indexed listing of that parent's children). */
export async function isListedChild(query: SessionQuery, parentId: string, childId: string, signal: AbortSignal): Promise<boolean> {
  return someRecord(query, { parentSession: parentId, origin: 'subagent' }, (id) => id === childId, signal)
}

/**
 * True when `id` is a subagent session: from the live header when the session
 * is live, else from the listing records of subagent sessions. Header facts
 * only; no log body is read.
 */
export async function isSubagent(services: ApiServices, id: string, signal: AbortSignal): Promise<boolean> {
  const live = services.sessions?.get(id)
  if (live !== undefined) return live.header.origin === 'subagent'
  return someRecord(services.sessionQuery, { origin: 'subagent' }, (recordId) => recordId === id, signal)
}

async function someRecord(
  query: SessionQuery,
  filter: { readonly parentSession?: string; readonly origin: 'subagent' },
  match: (id: string) => boolean,
  signal: AbortSignal,
): Promise<boolean> {
  let cursor: string | undefined
  do {
    const page = await query.listSessions({ ...filter, limit: PAGE_MAX_LIMIT, ...(cursor === undefined ? {} : { cursor }) }, signal)
    if (page.records.some((record) => match(record.header.id))) return true
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return false
}

/** True for the query service's "no such session" (a session gone between a listing and a read). */
export function isNotFound(error: unknown): boolean {
  return isDshError(error, 'SESSION_QUERY_NOT_FOUND')
}
