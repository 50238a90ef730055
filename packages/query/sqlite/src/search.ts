import type { SessionId } from '@dsh/session'
import type { EventSearchHit, SessionQueryRecord, SessionSearchHit } from '@dsh/session-query'
import { markedSnippet, snippetMarkers } from '@dsh/session-query/backend/reads'
import { type ListedRow, toRecord } from './index-store.js'
import type { ReadStatement } from './read-statements.js'

// The SQLite index's search: its FTS5 statements, its cursor tag and how
// its rows become hits. Loaded at the first search (a listing never needs it).

/** The SQLite index's search cursors: another backend's cursors are refused (`parseSearchRequest` of `@dsh/session-query/backend/reads`). */
export const SEARCH_CURSOR_TAG = 'search'

/**
 * The FTS5 query of a request's distinct words: each a quoted phrase, all
 * required, so no input can inject FTS syntax, and a word repeated 249 times
 * is one term: the statement's cost is linear in at most `SEARCH_MAX_TERMS`
 * terms.
 */
export function ftsMatch(words: readonly string[]): string {
  return words.map((w) => `"${w}"`).join(' ')
}

export interface EventHitRow {
  readonly id: string
  readonly seq: number
  readonly type: string
  /** Matches between this process's markers (`snippetOf`). */
  readonly snippet: string
  /** BM25 as FTS5 computes it: lower is better. */
  readonly bm25: number
}

export interface SessionHitRow extends ListedRow {
  readonly best: number
  readonly matches: number
}

/** The search cursor generation, read in the same transaction as the search it stamps. */
export const GENERATION: ReadStatement = { sql: "SELECT key, value FROM meta WHERE key IN ('epoch', 'generation')", params: [] }

export function generationOf(rows: readonly unknown[]): string {
  const meta = new Map((rows as Array<{ key: string; value: string }>).map((r) => [r.key, r.value]))
  return `${meta.get('epoch') ?? '?'}.${meta.get('generation') ?? '?'}`
}

// Ties in BM25 are broken by session id (binary = code point order) and seq, so pages are deterministic.

/** FTS5's `snippet` of `table`'s text, matches between this process's markers (`markedSnippet` makes them `[…]`). */
export function snippetOf(table: string): string {
  const { open, close } = snippetMarkers()
  return `snippet(${table}, 0, '${open}', '${close}', '…', 12)`
}

/** Matching events of persisted sessions and of the live sessions `liveIds`, best first. */
export function searchEventsStatement(match: string, liveIds: readonly string[], limit: number, offset: number): ReadStatement {
  return {
    sql: `
      SELECT s.id AS id, e.seq AS seq, e.type AS type, ${snippetOf('event_text')} AS snippet, bm25(event_text) AS bm25
      FROM event_text JOIN events e ON e.rowid = event_text.rowid JOIN sessions s ON s.sid = e.sid
      WHERE event_text MATCH ? AND dsh_budget(event_text.rowid) AND (s.revision IS NOT NULL OR s.id IN (SELECT value FROM json_each(?)))
      ORDER BY bm25, s.id, e.seq LIMIT ? OFFSET ?`,
    params: [match, JSON.stringify(liveIds), limit, offset],
  }
}

/**
 * Matching sessions ranked by their best event, with the number of matching
 * events. Rows of live sessions come back as they are indexed; the caller
 * replaces them with live records.
 */
export function searchSessionsStatement(match: string, liveIds: readonly string[], limit: number, offset: number): ReadStatement {
  return {
    sql: `
      WITH m AS MATERIALIZED (SELECT rowid, bm25(event_text) AS bm25 FROM event_text WHERE event_text MATCH ? AND dsh_budget(rowid))
      SELECT s.id AS id, s.header AS header, s.inherited AS inherited, s.revision AS revision, s.crc AS crc, MIN(m.bm25) AS best, COUNT(*) AS matches
      FROM m JOIN events e ON e.rowid = m.rowid JOIN sessions s ON s.sid = e.sid
      WHERE s.revision IS NOT NULL OR s.id IN (SELECT value FROM json_each(?))
      GROUP BY s.sid ORDER BY best, s.id LIMIT ? OFFSET ?`,
    params: [match, JSON.stringify(liveIds), limit, offset],
  }
}

/** Event hits of the rows a page statement returned (one more than the page, to know whether another follows). */
export function eventHits(rows: readonly unknown[], limit: number): { hits: EventSearchHit[]; more: boolean } {
  const found = rows as EventHitRow[]
  return {
    hits: found
      .slice(0, limit)
      .map((row) =>
        Object.freeze({ id: row.id as SessionId, seq: row.seq, type: row.type, ...markedSnippet(row.snippet), score: -row.bm25 }),
      ),
    more: found.length > limit,
  }
}

/**
 * Session hits of the rows a page statement returned: a persisted row is its
 * own record; a live session's record comes from memory (`live` answers it),
 * and a live session that left between the statement and now is left out,
 * as it left the corpus. Live records still lack their persisted revision.
 */
export function sessionHits(
  rows: readonly unknown[],
  limit: number,
  liveIds: ReadonlySet<string>,
  live: (id: string) => SessionQueryRecord | undefined,
): { hits: SessionSearchHit[]; more: boolean } {
  const found = rows as SessionHitRow[]
  const hits: SessionSearchHit[] = []
  for (const row of found.slice(0, limit)) {
    const record = liveIds.has(row.id) ? live(row.id) : toRecord(row)
    if (record !== undefined) hits.push(Object.freeze({ record, score: -row.best, matches: row.matches }))
  }
  return { hits, more: found.length > limit }
}
