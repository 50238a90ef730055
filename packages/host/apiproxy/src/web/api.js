// The JSON API as the page uses it: every call carries the bearer token from
// the page's address, and a refusal becomes an ApiFailure with the server's code.

export const token = new URLSearchParams(location.search).get('token') ?? ''

export class ApiFailure extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`)
    this.status = status
    this.code = body?.code ?? 'API_UNKNOWN'
  }
}

/** GET a JSON route; rejects with ApiFailure (the server's `{code, message}`) or the network error. */
export async function api(path, signal) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' }, signal })
  const body = await response.json().catch(() => undefined)
  if (!response.ok) throw new ApiFailure(response.status, body)
  return body
}

/** One percent-encoded path segment. */
export const seg = (id) => encodeURIComponent(id)

/** Where a session's own routes live: a subagent's go through its parent's catalog. */
export function sessionBase(id, parentId) {
  return parentId === undefined ? `/api/sessions/${seg(id)}` : `/api/sessions/${seg(parentId)}/subagents/${seg(id)}`
}

/**
 * A subagent's row in its parent's catalog, or `undefined` when the catalog
 * does not list it (yet): where the page reads a subagent's own tokens, turn
 * time, cost and liveness, since its stats are served only through its parent.
 */
export async function catalogRow(parentId, id) {
  const catalog = await api(`/api/sessions/${seg(parentId)}/subagents`)
  return catalog.rows.find((row) => row.id === id)
}

/** The address of an attachment's bytes, usable as an image source (the token rides in the query, as for the event stream). */
export function attachmentUrl(id, parentId, digest) {
  return `${sessionBase(id, parentId)}/attachments/${seg(digest)}?token=${encodeURIComponent(token)}`
}

/** The event stream of a top-level session (a subagent's changes reach it as catalog notices). */
export function streamUrl(id) {
  return `/api/sessions/${seg(id)}/stream?token=${encodeURIComponent(token)}`
}
