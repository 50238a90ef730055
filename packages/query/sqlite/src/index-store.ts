import { crc32 } from 'node:zlib'
import { parseSessionHeader, type SessionHeader, SessionLogOffset, type StoredSessionEvent, sameLifecycle } from '@dsh/session'
import type { SessionQueryRecord } from '@dsh/session-query'
import { eventText } from '@dsh/session-query/backend'
import type Database from 'better-sqlite3'

/** What reconciliation needs to know about an indexed session. */
export interface RowState {
  readonly id: string
  readonly revision: string | null
  readonly bodyRevision: string | null
}

interface SessionRow {
  readonly sid: number
  readonly id: string
  readonly header: string
  readonly inherited: number
  readonly revision: string | null
  readonly body_revision: string | null
  readonly body_state: 'indexed' | 'corrupt'
  readonly event_count: number
  readonly last_event: string | null
  readonly crc: number
}

export interface ListedRow {
  readonly id: string
  readonly header: string
  readonly inherited: number
  readonly revision: string
  readonly crc: number
}

/** Thrown when a row fails its checksum: the file is damaged in a way SQLite cannot see. */
export class IndexDamageError extends Error {}

/**
 * The synchronous face of the index database: prepared statements for
 * header and body upkeep. Callers group writes in `transaction`. Each
 * statement is prepared the first time it runs, so an open that finds
 * nothing to do (a listing of an unchanged root) prepares only what it reads.
 */
export class IndexStore {
  readonly db: Database.Database
  readonly #stmt: Statements
  /** Set by writes that can move a search result (text added or dropped, a session entering or leaving search). */
  #moved = false

  constructor(db: Database.Database) {
    this.db = db
    this.#stmt = lazyStatements(db)
  }

  /**
   * Runs `fn` in one write transaction. When it changed what a search
   * returns, the search generation is bumped in the same transaction, so a
   * cursor issued before fails as stale; a transaction that changed nothing
   * searchable (headers, revisions, the feed cursor) keeps every cursor valid.
   */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(() => {
      this.#moved = false
      const result = fn()
      if (this.#moved) this.#stmt.bump.run()
      this.#moved = false
      return result
    })()
  }

  /** The change-feed cursor the index is reconciled up to (`undefined`: never reconciled through the feed). */
  feedCursor(): string | undefined {
    return (this.#stmt.getMeta.get('feed') as { value: string } | undefined)?.value
  }

  setFeedCursor(cursor: string): void {
    this.#stmt.setMeta.run('feed', cursor)
  }

  /**
   * Sessions whose body must be (re)read: the feed named them, a rescan
   * listed a revision the body was not read at, or they went cold here. Kept
   * in the file, in the same transaction that advances the feed cursor, so a
   * crash or a cancelled read never loses a change the cursor already passed.
   */
  addPending(id: string): void {
    this.#stmt.addPending.run(id)
  }

  pendingIds(): string[] {
    return this.#stmt.pending.pluck().all() as string[]
  }

  clearPending(id: string): void {
    this.#stmt.clearPending.run(id)
  }

  rowStates(): Map<string, RowState> {
    const out = new Map<string, RowState>()
    for (const row of this.#stmt.states.iterate() as Iterable<{ id: string; revision: string | null; body_revision: string | null }>) {
      out.set(row.id, { id: row.id, revision: row.revision, bodyRevision: row.body_revision })
    }
    return out
  }

  rowState(id: string): RowState | undefined {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    return row === undefined ? undefined : { id: row.id, revision: row.revision, bodyRevision: row.body_revision }
  }

  /**
   * Records a session's header and listed revision: a revision string (what
   * persistence listed), `null` (only a live session of this process is
   * known) or `'keep'` (the stored one; used for headers from memory). A
   * different lifecycle under the same id drops the old event text, and with
   * `'keep'` also forgets the revision, so the next reconciliation re-reads
   * the persisted log instead of trusting a revision of another lifecycle.
   */
  writeHeader(header: SessionHeader, inherited: number, revision: string | null | 'keep'): void {
    const row = this.#stmt.get.get(header.id) as SessionRow | undefined
    const headerJson = JSON.stringify(header)
    if (row === undefined) {
      const fresh = revision === 'keep' ? null : revision
      this.#stmt.insert.run({
        ...headerColumns(header, headerJson, inherited),
        revision: fresh,
        crc: rowCrc(header.id, headerJson, inherited, fresh),
      })
      return
    }
    const sameLog =
      row.header === headerJson
        ? row.inherited === inherited
        : row.inherited === inherited && sameLifecycle(parseStoredHeader(row.header), header)
    const nextRevision = revision !== 'keep' ? revision : sameLog ? row.revision : null
    if (row.header === headerJson && row.inherited === inherited && row.revision === nextRevision) return
    // Search shows persisted rows (and live ones): a row becoming or ceasing to be persisted moves results.
    if ((row.revision === null) !== (nextRevision === null) && row.event_count > 0) this.#moved = true
    if (!sameLog) this.#dropEvents(row.sid)
    this.#stmt.updateHeader.run({
      sid: row.sid,
      ...headerColumns(header, headerJson, inherited),
      revision: nextRevision,
      crc: rowCrc(header.id, headerJson, inherited, nextRevision),
    })
    if (!sameLog) this.#stmt.resetBody.run(row.sid)
  }

  /**
   * Brings the event text of `id` up to `events`, the log from offset `from`
   * on (a whole log when `from` is 0, persisted or live; else a suffix read).
   * When the indexed prefix is still a prefix of the log only the new events
   * are added: a suffix must start at or before the last indexed event, whose
   * digest must match. A whole log that does not extend the indexed prefix is
   * indexed again from nothing; a suffix that does not (the log was
   * re-created or rewritten) writes nothing and returns `false`: read the
   * whole log. `bodyRevision` records which persisted revision this body was
   * read at (`undefined` when it came from memory).
   */
  writeBody(id: string, events: readonly StoredSessionEvent[], bodyRevision: string | undefined, from = 0): boolean {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    if (row === undefined) return true
    const end = from + events.length
    let indexed = row.event_count
    if (!this.#extends(row, events, from)) {
      if (from > 0) return false
      this.#dropEvents(row.sid)
      indexed = 0
    }
    for (let i = indexed; i < end; i++) {
      const event = events[i - from]!
      const text = eventText(event)
      if (text === undefined) continue
      const rowid = this.#stmt.insertEvent.run(row.sid, event.seq, event.type).lastInsertRowid
      this.#stmt.insertText.run(rowid, text)
      this.#moved = true
    }
    const last = end === 0 ? null : end === indexed ? row.last_event : digest(events[end - 1 - from]!)
    this.#stmt.updateBody.run({
      sid: row.sid,
      body_revision: bodyRevision ?? row.body_revision,
      body_state: 'indexed',
      event_count: end,
      last_event: last,
    })
    return true
  }

  /**
   * Whether the log from `from` (its `events`) continues what is indexed for
   * `id`: the same lifecycle and cut, a readable body, and the last indexed
   * event present with the same digest. Decides between a suffix read and a
   * whole one before any write.
   */
  continues(id: string, header: SessionHeader, inherited: number, events: readonly StoredSessionEvent[], from: number): boolean {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    if (row === undefined) return from === 0
    if (row.inherited !== inherited || (row.header !== JSON.stringify(header) && !sameLifecycle(parseStoredHeader(row.header), header)))
      return false
    return this.#extends(row, events, from)
  }

  /** Where a suffix read of `id` should start: at its last indexed event (0 to read it whole). */
  suffixStart(id: string): number {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    return row === undefined || row.body_state !== 'indexed' || row.event_count === 0 ? 0 : row.event_count - 1
  }

  #extends(row: SessionRow, events: readonly StoredSessionEvent[], from: number): boolean {
    if (row.body_state !== 'indexed' && from > 0) return false
    const indexed = row.event_count
    if (indexed < from || indexed > from + events.length) return false
    return indexed === 0 || digest(events[indexed - 1 - from]!) === row.last_event
  }

  /** The log at `revision` cannot be read: keep the header (it still lists), drop its text. */
  markCorrupt(id: string, revision: string): void {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    if (row === undefined) return
    this.#dropEvents(row.sid)
    this.#stmt.updateBody.run({ sid: row.sid, body_revision: revision, body_state: 'corrupt', event_count: 0, last_event: null })
  }

  delete(id: string): void {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    if (row === undefined) return
    this.#dropEvents(row.sid)
    this.#stmt.deleteSession.run(row.sid)
  }

  /** The listed record of `id` as indexed (its header and revision), or `undefined` without a listed row. */
  record(id: string): SessionQueryRecord | undefined {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    return row === undefined || row.revision === null ? undefined : toRecord(row as ListedRow)
  }

  /** Indexed count of events of `id` (to decide whether a live session has new ones). */
  indexedCount(id: string): { count: number; header: string; inherited: number } | undefined {
    const row = this.#stmt.get.get(id) as SessionRow | undefined
    return row === undefined ? undefined : { count: row.event_count, header: row.header, inherited: row.inherited }
  }

  close(): void {
    this.db.close()
  }

  #dropEvents(sid: number): void {
    this.#stmt.deleteText.run(sid)
    if (this.#stmt.deleteEvents.run(sid).changes > 0) this.#moved = true
  }
}

const STATEMENTS = {
  bump: "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'",
  getMeta: 'SELECT value FROM meta WHERE key = ?',
  setMeta: 'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  addPending: 'INSERT OR IGNORE INTO pending (id) VALUES (?)',
  pending: 'SELECT id FROM pending',
  clearPending: 'DELETE FROM pending WHERE id = ?',
  states: 'SELECT id, revision, body_revision FROM sessions',
  get: 'SELECT sid, id, header, inherited, revision, body_revision, body_state, event_count, last_event, crc FROM sessions WHERE id = ?',
  insert:
    'INSERT INTO sessions (id, created_at, parent, origin, cwd, header, inherited, revision, crc) VALUES (@id, @created_at, @parent, @origin, @cwd, @header, @inherited, @revision, @crc)',
  updateHeader:
    'UPDATE sessions SET id = @id, created_at = @created_at, parent = @parent, origin = @origin, cwd = @cwd, header = @header, inherited = @inherited, revision = @revision, crc = @crc WHERE sid = @sid',
  resetBody: "UPDATE sessions SET body_revision = NULL, body_state = 'indexed', event_count = 0, last_event = NULL WHERE sid = ?",
  updateBody:
    'UPDATE sessions SET body_revision = @body_revision, body_state = @body_state, event_count = @event_count, last_event = @last_event WHERE sid = @sid',
  deleteSession: 'DELETE FROM sessions WHERE sid = ?',
  insertEvent: 'INSERT INTO events (sid, seq, type) VALUES (?, ?, ?)',
  insertText: 'INSERT INTO event_text (rowid, text) VALUES (?, ?)',
  deleteText: 'DELETE FROM event_text WHERE rowid IN (SELECT rowid FROM events WHERE sid = ?)',
  deleteEvents: 'DELETE FROM events WHERE sid = ?',
} as const

type Statements = { readonly [K in keyof typeof STATEMENTS]: Database.Statement }

/** The statements of `STATEMENTS` on `db`, each prepared at its first use and then kept as a plain property. */
function lazyStatements(db: Database.Database): Statements {
  const statements = {}
  for (const [key, sql] of Object.entries(STATEMENTS)) {
    Object.defineProperty(statements, key, {
      configurable: true,
      get() {
        const statement = db.prepare(sql)
        Object.defineProperty(statements, key, { value: statement })
        return statement
      },
    })
  }
  return statements as Statements
}

function headerColumns(header: SessionHeader, json: string, inherited: number) {
  return {
    id: header.id,
    created_at: header.createdAt,
    parent: header.parentSession ?? null,
    origin: header.origin ?? null,
    cwd: header.cwd ?? null,
    header: json,
    inherited,
  }
}

export function rowCrc(id: string, header: string, inherited: number, revision: string | null): number {
  return crc32(`${id}\u0000${header}\u0000${inherited}\u0000${revision ?? '\u0000'}`)
}

function parseStoredHeader(json: string): SessionHeader {
  try {
    return parseSessionHeader(JSON.parse(json))
  } catch (error) {
    throw new IndexDamageError('An index row holds an unreadable header.', { cause: error })
  }
}

export function toRecord(row: ListedRow): SessionQueryRecord {
  if (rowCrc(row.id, row.header, row.inherited, row.revision) !== row.crc)
    throw new IndexDamageError(`The index row of session '${row.id}' fails its checksum.`)
  const header = parseStoredHeader(row.header)
  if (header.id !== row.id) throw new IndexDamageError(`The index row of session '${row.id}' holds another session's header.`)
  return Object.freeze({
    header,
    inheritedEventCount: SessionLogOffset(row.inherited),
    live: false,
    persisted: true,
    revision: row.revision,
  })
}

/** Identifies one event well enough to tell whether an indexed prefix is still a prefix. */
function digest(event: StoredSessionEvent): string {
  // node:crypto is loaded at the first digest (a write), not by a listing.
  return process
    .getBuiltinModule('node:crypto')
    .createHash('sha1')
    .update(JSON.stringify([event.type, event.seq, event.time, event.data]))
    .digest('base64url')
}
