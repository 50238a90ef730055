import type { SessionHeader, SessionId, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import type { SessionRevision } from '@dsh/session-persistence'

/** One session of the live-preferred corpus. */
export interface SessionQueryRecord {
  /** The live header when the session is live, else the persisted one. */
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  readonly live: boolean
  readonly persisted: boolean
  /** The persisted revision, when persisted. */
  readonly revision?: SessionRevision
}

export interface SessionListFilter {
  readonly parentSession?: string
  /**
   * The children of any of these parents (1..1000 distinct ids; not with
   * `parentSession`): one indexed listing for the children of a whole
   * generation, so a caller asking about N parents reads their children
   * only, in one query instead of N.
   */
  readonly parentSessions?: readonly string[]
  /**
   * These sessions only (1..1000 distinct ids): a lookup by id that reads
   * their rows only, for a caller that knows which sessions it wants (a
   * tree's root) and not where they sit in the listing.
   */
  readonly ids?: readonly string[]
  readonly origin?: 'subagent'
  readonly cwd?: string
  /** Inclusive range on `header.createdAt` (epoch ms). */
  readonly createdAt?: { readonly from?: number; readonly to?: number }
  /** Page size (1..1000); no limit returns every match. */
  readonly limit?: number
  /** Opaque cursor from a previous page of the same filter. */
  readonly cursor?: string
}

/** Records ordered by `createdAt` ascending, then id ascending. */
export interface SessionListPage {
  readonly records: readonly SessionQueryRecord[]
  readonly nextCursor?: string
}

/** A body-bearing observation: live from memory, persisted through `inspect`. */
export interface SessionQueryObservation {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  readonly events: readonly StoredSessionEvent[]
  readonly live: boolean
  readonly revision?: SessionRevision
}

export interface HistoryPageRequest {
  /** Return events strictly before this seq (default: the end of the log). */
  readonly before?: number
  /** At most this many events (1..1000, default 100). */
  readonly limit?: number
}

/** An exact window of events around one position. */
export interface EventWindowRequest {
  /** The position the window is centred on; must exist in the log. */
  readonly seq: number
  /** Events before `seq` to include (0..1000, default 10). */
  readonly before?: number
  /** Events after `seq` to include (0..1000, default 10). */
  readonly after?: number
}

export interface EventWindow {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** Ascending by seq; includes `seq` itself. */
  readonly events: readonly StoredSessionEvent[]
  readonly total: number
}

export interface HistoryPage {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** Ascending by seq. */
  readonly events: readonly StoredSessionEvent[]
  /** Pass as `before` for the previous page; absent at the start of the log. */
  readonly nextBefore?: number
  readonly total: number
}

export interface SearchRequest {
  /** Words to find (letters and digits); every word is required. */
  readonly text: string
  /** Page size (1..100, default 20). */
  readonly limit?: number
  /** From a previous page of the same search; rejected once the index changed. */
  readonly cursor?: string
}

export interface SessionSearchHit {
  /** The live-preferred record of the matching session. */
  readonly record: SessionQueryRecord
  /** The score of the session's best matching event; higher is better. */
  readonly score: number
  /** How many of its events match. */
  readonly matches: number
}

/** Where a match's `[…]` is in a snippet: `[start, end)` in UTF-16 code units, the brackets included. */
export type SnippetMark = readonly [start: number, end: number]

export interface EventSearchHit {
  readonly id: SessionId
  readonly seq: number
  readonly type: string
  /** The matching text around the hit, matched words in `[…]`. */
  readonly snippet: string
  /** Where each match's `[…]` is in `snippet`; brackets elsewhere are the text's own. */
  readonly marks: readonly SnippetMark[]
  /** Higher is better; ties are ordered by id, then seq. */
  readonly score: number
}

export interface SearchPage<T> {
  readonly hits: readonly T[]
  readonly nextCursor?: string
}

/** Progress of a long index job (rebuild / reconcile). */
export interface IndexProgress {
  /** `scan`: listing persisted headers; `index`: reading changed logs and indexing their text. */
  readonly phase: 'scan' | 'index'
  readonly done: number
  readonly total: number
  /** Present when the index is being built from nothing, and why. */
  readonly rebuild?: 'missing' | 'corrupt' | 'schema' | 'requested'
}

/** The query service (service `sessionQuery`). */
export interface SessionQuery {
  listSessions(filter?: SessionListFilter, signal?: AbortSignal): Promise<SessionListPage>
  observeSession(id: string, signal?: AbortSignal): Promise<SessionQueryObservation>
  /** A page of history ending before `request.before`. */
  readHistory(id: string, request?: HistoryPageRequest, signal?: AbortSignal): Promise<HistoryPage>
  /** The events around one existing seq (`SESSION_QUERY_NOT_FOUND` when the seq does not exist). */
  readWindow(id: string, request: EventWindowRequest, signal?: AbortSignal): Promise<EventWindow>
  /** Full-text search; only backends with an index implement it. */
  searchSessions?(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<SessionSearchHit>>
  searchEvents?(request: SearchRequest, signal?: AbortSignal): Promise<SearchPage<EventSearchHit>>
  close?(): Promise<void> | void
}

declare module '@dsh/context' {
  interface Services {
    sessionQuery: SessionQuery
  }
}
