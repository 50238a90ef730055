import { isDshError } from '@dsh/context'
import type { SessionListFilter, SessionQuery } from '@dsh/session-query'
import type { ApiServices } from './services.js'

// Owner checks read headers only (a live session's, or listing records), never
// a log body: they run before any read of a session's data, so a refusal is
// the same whether that data is healthy, corrupt or unreadable.

/** True when the corpus lists `childId` as a subagent session whose parent is `parentId` (one lookup of the child's row). */
export async function isListedChild(query: SessionQuery, parentId: string, childId: string, signal: AbortSignal): Promise<boolean> {
  return isListed(query, childId, { parentSession: parentId, origin: 'subagent' }, signal)
}

/**
 * True when `id` is a subagent session: from the live header when the session
 * is live, else from its listing record (one lookup of its row). Header facts
 * only; no log body is read.
 */
export async function isSubagent(services: ApiServices, id: string, signal: AbortSignal): Promise<boolean> {
  const live = services.sessions?.get(id)
  if (live !== undefined) return live.header.origin === 'subagent'
  return isListed(services.sessionQuery, id, { origin: 'subagent' }, signal)
}

/** Whether the live-preferred listing holds `id` under `filter`: a lookup by id, so it reads that one row, never the corpus. */
async function isListed(
  query: SessionQuery,
  id: string,
  filter: Pick<SessionListFilter, 'parentSession' | 'origin'>,
  signal: AbortSignal,
): Promise<boolean> {
  if (id.length === 0) return false
  const page = await query.listSessions({ ...filter, ids: [id] }, signal)
  return page.records.some((record) => record.header.id === id)
}

/** True for the query service's "no such session" (a session gone between a listing and a read). */
export function isNotFound(error: unknown): boolean {
  return isDshError(error, 'SESSION_QUERY_NOT_FOUND')
}
