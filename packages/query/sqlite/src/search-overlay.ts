import { crc32 } from 'node:zlib'
import { isDshError } from '@dsh/context'
import { compareSessionIds, type Session, type StoredSessionEvent } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { eventText, fromPersistenceError } from '@dsh/session-query/backend'
import type BetterSqlite3 from 'better-sqlite3'
import { readChange } from './body-reads.js'
import { type IndexStore, rowCrc } from './index-store.js'
import { eachBounded } from './overlay.js'
import type { ReadStatement } from './read-statements.js'
import { snippetOf } from './search.js'

// A search over an index that is behind: the sessions it has not caught up
// with are read from their logs (only what the index lacks: the batches
// after its last indexed event, or the whole log when it was re-created),
// and the live sessions of this process from memory, into TEMP tables of the
// searching connection — private to it, so a read-only connection holds
// them too and no search writes the index — and every search statement
// takes the union of the index, less what the overlay replaces, and the
// overlay. Loaded at the first search that needs it.

const TEMP_SCHEMA = `
  CREATE TEMP TABLE IF NOT EXISTS overlay_sessions (
    id TEXT PRIMARY KEY,
    -- NULL: the session is gone from search (deleted, or its log is corrupt).
    header TEXT,
    inherited INTEGER,
    revision TEXT,
    crc INTEGER,
    -- Indexed events of the session from this seq on are not current; the overlay holds what replaces them.
    indexed INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TEMP TABLE IF NOT EXISTS overlay_events (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL);
  CREATE VIRTUAL TABLE IF NOT EXISTS temp.overlay_text USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
`

interface Entry {
  readonly id: string
  readonly indexed: number
  /** What the session is now (`revision` null: live here, answered from memory); absent: gone from search. */
  readonly current?: { readonly header: string; readonly inherited: number; readonly revision: string | null }
  readonly events: readonly StoredSessionEvent[]
}

/** Live sessions whose text in memory the index lacks (events not indexed yet, or another lifecycle). */
export function liveAhead(store: IndexStore, live: readonly Session[]): Session[] {
  return live.filter((session) => {
    const row = store.indexedCount(session.id)
    return (
      row === undefined ||
      row.count !== session.seq ||
      row.inherited !== session.inheritedEventCount ||
      row.header !== JSON.stringify(session.header)
    )
  })
}

/** A session whose text comes from memory: live here (`revision` null), or gone cold here at `revision`. */
export interface HeldSession {
  readonly session: Session
  readonly revision: string | null
}

/**
 * Reads what the index lacks of `ids` (from their logs) and of `held` (from
 * memory) and loads it into the TEMP tables of `db`, replacing the previous
 * search's overlay. Returns a tag of what was loaded: search cursors carry
 * it, so a cursor issued over another overlay is stale.
 */
export async function loadSearchOverlay(
  db: BetterSqlite3.Database,
  store: IndexStore,
  persistence: SessionPersistence,
  ids: readonly string[],
  held: readonly HeldSession[],
  concurrency: number,
  signal: AbortSignal | undefined,
): Promise<string> {
  const entries: Entry[] = []
  for (const { session, revision } of held) {
    const events = session.events
    const row = store.indexedCount(session.id)
    const indexed = row !== undefined && store.continues(session.id, session.header, session.inheritedEventCount, events, 0) ? row.count : 0
    entries.push({
      id: session.id,
      indexed,
      current: { header: JSON.stringify(session.header), inherited: session.inheritedEventCount, revision },
      events: events.slice(indexed),
    })
  }
  await eachBounded(ids, concurrency, async (id) => {
    try {
      const change = await readChange(store, persistence, id, signal)
      if (change === 'unchanged') return
      const { observation } = change
      const indexed = change.rewritten ? 0 : (store.indexedCount(id)?.count ?? 0)
      entries.push({
        id,
        indexed,
        current: { header: JSON.stringify(observation.header), inherited: observation.inheritedEventCount, revision: observation.revision },
        events: observation.events.filter((event) => event.seq >= indexed),
      })
    } catch (error) {
      // Deleted, or a log that cannot be read: out of search, as a corrupt log is.
      if (!isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND', 'SESSION_PERSISTENCE_CORRUPT')) throw fromPersistenceError(error, id, signal)
      entries.push({ id, indexed: 0, events: [] })
    }
  })
  entries.sort((a, b) => compareSessionIds(a.id, b.id))
  db.exec(TEMP_SCHEMA)
  const insertSession = db.prepare(
    'INSERT INTO temp.overlay_sessions (id, header, inherited, revision, crc, indexed) VALUES (?, ?, ?, ?, ?, ?)',
  )
  const insertEvent = db.prepare('INSERT INTO temp.overlay_events (id, seq, type) VALUES (?, ?, ?)')
  const insertText = db.prepare('INSERT INTO temp.overlay_text (rowid, text) VALUES (?, ?)')
  db.transaction(() => {
    db.exec('DELETE FROM temp.overlay_sessions; DELETE FROM temp.overlay_events; DELETE FROM temp.overlay_text;')
    for (const { id, indexed, current, events } of entries) {
      const crc = current === undefined ? null : rowCrc(id, current.header, current.inherited, current.revision)
      insertSession.run(id, current?.header ?? null, current?.inherited ?? null, current?.revision ?? null, crc, indexed)
      for (const event of events) {
        const text = eventText(event)
        if (text === undefined) continue
        insertText.run(insertEvent.run(id, event.seq, event.type).lastInsertRowid, text)
      }
    }
  })()
  return crc32(JSON.stringify(entries.map((e) => [e.id, e.current?.revision ?? null, e.indexed]))).toString(36)
}

/** Indexed events that still stand: none of a session the overlay replaces from that seq on. */
const STANDING = 'NOT EXISTS (SELECT 1 FROM temp.overlay_sessions o WHERE o.id = s.id AND e.seq >= o.indexed)'

/** `searchEventsStatement` over the index and the overlay. */
export function overlayEventsStatement(match: string, liveIds: readonly string[], limit: number, offset: number): ReadStatement {
  return {
    sql: `
      SELECT id, seq, type, snippet, bm25 FROM (
        SELECT s.id AS id, e.seq AS seq, e.type AS type, ${snippetOf('event_text')} AS snippet, bm25(event_text) AS bm25
        FROM event_text JOIN events e ON e.rowid = event_text.rowid JOIN sessions s ON s.sid = e.sid
        WHERE event_text MATCH ? AND dsh_budget(event_text.rowid) AND ${STANDING}
          AND (s.revision IS NOT NULL OR s.id IN (SELECT value FROM json_each(?)))
        UNION ALL
        SELECT o.id, o.seq, o.type, ${snippetOf('overlay_text')}, bm25(overlay_text)
        FROM temp.overlay_text JOIN temp.overlay_events o ON o.rowid = overlay_text.rowid
        WHERE overlay_text MATCH ? AND dsh_budget(overlay_text.rowid)
      )
      ORDER BY bm25, id, seq LIMIT ? OFFSET ?`,
    params: [match, JSON.stringify(liveIds), match, limit, offset],
  }
}

/** `searchSessionsStatement` over the index and the overlay: a session the overlay holds is listed as its log is now. */
export function overlaySessionsStatement(match: string, liveIds: readonly string[], limit: number, offset: number): ReadStatement {
  return {
    sql: `
      WITH m AS MATERIALIZED (
        SELECT s.id AS id, bm25(event_text) AS bm25
        FROM event_text JOIN events e ON e.rowid = event_text.rowid JOIN sessions s ON s.sid = e.sid
        WHERE event_text MATCH ? AND dsh_budget(event_text.rowid) AND ${STANDING}
        UNION ALL
        SELECT o.id, bm25(overlay_text) FROM temp.overlay_text JOIN temp.overlay_events o ON o.rowid = overlay_text.rowid
        WHERE overlay_text MATCH ? AND dsh_budget(overlay_text.rowid)
      )
      SELECT m.id AS id, COALESCE(o.header, s.header) AS header, COALESCE(o.inherited, s.inherited) AS inherited,
        CASE WHEN o.id IS NULL THEN s.revision ELSE o.revision END AS revision, COALESCE(o.crc, s.crc) AS crc,
        MIN(m.bm25) AS best, COUNT(*) AS matches
      FROM m LEFT JOIN temp.overlay_sessions o ON o.id = m.id LEFT JOIN sessions s ON s.id = m.id
      WHERE (o.id IS NOT NULL AND o.header IS NOT NULL)
        OR (o.id IS NULL AND (s.revision IS NOT NULL OR s.id IN (SELECT value FROM json_each(?))))
      GROUP BY m.id ORDER BY best, m.id LIMIT ? OFFSET ?`,
    params: [match, match, JSON.stringify(liveIds), limit, offset],
  }
}
