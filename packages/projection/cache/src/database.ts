import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Logger } from '@dsh/context'
import type Database from 'better-sqlite3'
import { SessionProjectionCacheError } from './errors.js'
import { openSqlite } from './sqlite.js'

/** Bumped whenever the table layout changes: a file of another version is rebuilt. */
export const CACHE_SCHEMA_VERSION = 3
/** "dshc": tells our file apart from any other SQLite database at the same path. */
const APPLICATION_ID = 0x64736863

/**
 * A row's payload as stored: its witness (`rowWitness`: identity, cut,
 * stateVersion) followed by the JSON text `[seq, state]`, or `[seq]` for a
 * failed unit. One column, so a lookup reads one value, compares a prefix and
 * parses once. The identity, cut, version, seq and failed columns beside it
 * keep the table queryable and drive the one-checkpoint-per-session delete.
 */
export type StoredPayload = string

/** A row ready to store. */
export interface EncodedRow {
  readonly key: string
  readonly stateVersion: number
  readonly seq: number
  readonly failed: boolean
  readonly payload: StoredPayload
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS checkpoint_rows (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    identity TEXT NOT NULL,
    inherited_event_count INTEGER NOT NULL,
    state_version INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS feed_cursor (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    cursor TEXT NOT NULL
  );
  PRAGMA application_id = ${APPLICATION_ID};
  PRAGMA user_version = ${CACHE_SCHEMA_VERSION};
`

/**
 * What a connection open for writing does: store a checkpoint, forget
 * sessions (with the feed cursor, in one transaction), and the reads a
 * forgetting pass makes on it.
 */
interface Writer {
  checkpoint(sessionId: string, identity: string, cut: number, rows: readonly EncodedRow[]): void
  forget(ids: readonly string[], cursor: string): void
  held(among: readonly string[] | undefined): string[]
  cursor(): string | undefined
}

/** Errors that mean the file itself is damaged: the cure is a rebuild, not a retry. */
const DAMAGED = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_CORRUPT_INDEX', 'SQLITE_CORRUPT_SEQUENCE', 'SQLITE_CORRUPT_VTAB'])

/** How long a statement waits for another connection's lock before it fails `locked` (ms). */
const BUSY_TIMEOUT_MS = 2_000

/**
 * Why the cache file cannot be used (in `details.state` of
 * `SESSION_PROJECTION_CACHE_UNAVAILABLE`). `corrupt` (damaged, not SQLite,
 * another application's) and `schema` (another version) are cured by a
 * writer's rebuild. `missing`, `full` (no space: ENOSPC, EDQUOT,
 * SQLITE_FULL), `read-only` (a read-only file system or a file this user
 * cannot write: EROFS, EACCES, SQLITE_READONLY), `locked` (another
 * connection holds it: SQLITE_BUSY, SQLITE_LOCKED), `not-a-directory` (the
 * directory holding the file is a symbolic link, or not a directory: what a
 * writer creates there would land wherever it points, outside the root) and
 * `io` (anything else) are not: the file is left exactly as it is.
 */
export type CacheFileState = 'missing' | 'corrupt' | 'schema' | 'full' | 'read-only' | 'locked' | 'not-a-directory' | 'io'

/** Error codes by the state they mean; what is in none of them is `io`. */
const STATES: ReadonlyArray<readonly [CacheFileState, (code: string) => boolean]> = [
  ['corrupt', (code) => DAMAGED.has(code)],
  ['full', (code) => code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT'],
  ['read-only', (code) => code.startsWith('SQLITE_READONLY') || code === 'EROFS' || code === 'EACCES' || code === 'EPERM'],
  ['locked', (code) => code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')],
]

/** What a failure says about the file, never `corrupt` unless SQLite said the file is damaged. */
function failureState(error: unknown): CacheFileState {
  if (error instanceof SessionProjectionCacheError) return (error.details as { state: CacheFileState }).state
  const code = String((error as { code?: unknown } | null)?.code ?? '')
  return STATES.find(([, matches]) => matches(code))?.[0] ?? 'io'
}

export interface CheckpointDatabaseOptions {
  /** Run SQLite's `quick_check` on open (for `dsh verify`). */
  readonly check?: boolean
  /** Read only: open the file read-only if it exists; never create, change, rebuild or remove anything. */
  readonly readOnly?: boolean
}

/**
 * The checkpoint table in one SQLite file. A writer (the default) opens it
 * for writing in WAL mode, creating it when missing; a file that is garbage,
 * damaged, another application's or another schema version's is deleted
 * and recreated empty — the cache is derived data, so a rebuild only costs
 * misses. A file that cannot be opened for another reason (a full disk, a
 * read-only file system, a lock held by another connection, any other I/O
 * failure) is never touched: the writer reads it read-only if it can (its
 * writes fail softly, and each write tries to open it for writing again),
 * else the cache is unavailable (reads miss, writes fail softly), with the
 * state as its typed reason.
 *
 * A read-only database (`readOnly`: hosts that only read) opens the file
 * read-only or not at all, and never writes, creates or removes anything; a
 * damaged file is reported, not rebuilt. Reads of either never write: damage
 * a read meets closes the connection and is rebuilt by the writer's next
 * write, not by the read.
 *
 * A writer leaves the file at rest when it closes (rollback-journal mode, no
 * WAL companions, when no other connection holds it), so a reader on a
 * read-only mount opens it without creating anything.
 *
 * Only a writer deletes rows of sessions that are gone (`forget`, for the
 * cache's forgetting passes), keeping the change-feed cursor those passes
 * reached in `feed_cursor` beside them.
 */
export class CheckpointDatabase {
  readonly path: string
  readonly readOnly: boolean
  #db: Database.Database | undefined
  #select: Database.Statement<[string, string], StoredPayload> | undefined
  #writer: Writer | undefined
  /** Why the database cannot be read, or (a writer reading only) written. */
  #problem: SessionProjectionCacheError | undefined
  /** A read met damage: the writer rebuilds before its next write. */
  #damaged = false
  #closed = false
  /** Writes refused since the last attempt to open for writing, and how many make the next attempt (doubling to 1024). */
  #skipped = 0
  #reopenAfter = 1
  readonly #logger: () => Logger
  readonly #check: boolean
  rebuilds = 0

  /**
   * `check` runs SQLite's `quick_check` (a pass over every page) on open: for
   * `dsh verify`, not for every command. Without it, damage inside the file
   * is found by the statement that meets it.
   */
  constructor(path: string, logger: () => Logger, options: CheckpointDatabaseOptions = {}) {
    this.path = path
    this.#logger = logger
    this.#check = options.check === true
    this.readOnly = options.readOnly === true
    this.#open()
  }

  /**
   * Runs `quick_check` now: `'ok'`, or SQLite's complaint, after which a
   * writer has rebuilt the file empty (a read-only database reports it and
   * leaves the file). `'unavailable'` when no database is open.
   */
  check(): string {
    const db = this.#db
    if (db === undefined || this.#select === undefined) return 'unavailable'
    let result: string
    try {
      result = String(db.pragma('quick_check', { simple: true }))
    } catch (error) {
      result = error instanceof Error ? error.message : String(error)
    }
    if (result !== 'ok' && this.#writer !== undefined) this.#rebuild(`quick_check reports ${JSON.stringify(result)}`)
    return result
  }

  /** Whether reads are served (an open connection, writable or not). */
  get available(): boolean {
    return this.#select !== undefined
  }

  /** Whether writes are taken now. */
  get writable(): boolean {
    return this.#writer !== undefined
  }

  /**
   * `SESSION_PROJECTION_CACHE_UNAVAILABLE` with `details: { path, state }`:
   * why the file cannot be read, or (when `available`) written; `undefined`
   * when it is open for everything this database does.
   */
  get unavailable(): SessionProjectionCacheError | undefined {
    return this.#problem
  }

  /**
   * One point lookup by primary key: the payload, whatever lifecycle it was
   * written for (the caller checks its witness), or `undefined`. A failure
   * is rethrown (the caller misses); after damage or a lock the connection
   * is used no more, so later reads miss at once (a writer reopens it, or
   * rebuilds damage, on its next write).
   */
  read(sessionId: string, key: string): StoredPayload | undefined {
    const select = this.#select
    if (!select) return undefined
    return this.#reading(() => select.get(sessionId, key))
  }

  /**
   * Of the sessions `among` (every session, when `undefined`), those with
   * rows; `[]` when not open for writing (only a writer forgets). Failures
   * are met as `read` meets them.
   */
  heldSessions(among: readonly string[] | undefined): string[] {
    const writer = this.#writer
    return writer === undefined ? [] : this.#reading(() => writer.held(among))
  }

  /** The change-feed cursor the last forgetting pass stored, or `undefined` (none, or not open for writing). */
  forgetCursor(): string | undefined {
    const writer = this.#writer
    return writer === undefined ? undefined : this.#reading(() => writer.cursor())
  }

  /** A read on the connection; damage or a lock met stops its use (see `read`). */
  #reading<T>(read: () => T): T {
    try {
      return read()
    } catch (error) {
      const state = failureState(error)
      if (state === 'corrupt' || state === 'locked') {
        this.#damaged ||= state === 'corrupt'
        // Not closed here: closing a writer's connection writes (it checkpoints, or puts the file at rest).
        this.#select = undefined
        this.#writer = undefined
        this.#problem = this.#failure(state, 'Reading', error)
      }
      throw error
    }
  }

  /**
   * Stores the rows of one session's checkpoint in one transaction. Rows of
   * another lifecycle or cut are deleted first (one checkpoint per session).
   * The last write wins: the scheduler keeps writes of one session in order,
   * and a lifecycle recreated with an identical header (indistinguishable by
   * its witness) must replace its predecessor's rows, not be masked by them.
   * A writer not open for writing (or told of damage by a read) opens (or
   * rebuilds) first; damage met by the write is rebuilt and the write made
   * once more. Throws `SESSION_PROJECTION_CACHE_UNAVAILABLE` (its state in
   * `details`) when it cannot write.
   */
  write(sessionId: string, identity: string, inheritedEventCount: number, rows: readonly EncodedRow[]): void {
    this.#writing((writer) => writer.checkpoint(sessionId, identity, inheritedEventCount, rows))
  }

  /**
   * Deletes every row of the sessions `ids` and stores the change-feed
   * `cursor` the forgetting pass covered, in one transaction, under the
   * rules of `write` (open or rebuild first, damage rebuilt and the step
   * made once more). Throws `SESSION_PROJECTION_CACHE_UNAVAILABLE` when it
   * cannot write.
   */
  forget(ids: readonly string[], cursor: string): void {
    this.#writing((writer) => writer.forget(ids, cursor))
  }

  #writing(step: (writer: Writer) => void): void {
    if (!this.readOnly && !this.#closed) {
      if (this.#damaged) this.#rebuild('a read found it damaged')
      else if (this.#writer === undefined && ++this.#skipped >= this.#reopenAfter) this.#reopen()
    }
    for (let attempt = 0; ; attempt++) {
      const writer = this.#writer
      if (writer === undefined) throw this.#problem ?? this.#failure(this.#closed ? 'io' : 'read-only', 'Writing', undefined)
      try {
        step(writer)
        return
      } catch (error) {
        if (failureState(error) !== 'corrupt' || attempt > 0) throw error
        this.#rebuild(`SQLite reported ${String((error as { code?: unknown }).code)}`)
      }
    }
  }

  close(): void {
    this.#closed = true
    this.#release()
  }

  /** Closes the connection, a writer's at rest. */
  #release(): void {
    const db = this.#db
    const atRest = this.#writer !== undefined
    this.#db = undefined
    this.#select = undefined
    this.#writer = undefined
    if (db === undefined) return
    try {
      // Rollback-journal mode removes the WAL companions; only possible while no other connection holds the file.
      if (atRest) {
        db.pragma('busy_timeout = 0')
        db.pragma('journal_mode = DELETE')
      }
    } catch {
      // Held elsewhere: it stays in WAL mode, and the last connection leaves the WAL to the next writer.
    }
    try {
      db.close()
    } catch (error) {
      this.#logger().warn(`dsh: closing the projection cache at ${this.path} failed.`, error)
    }
  }

  #open(): void {
    if (this.readOnly) {
      this.#openReader(undefined)
      return
    }
    const failure = this.#openWriter()
    if (failure === undefined) return
    const state = failureState(failure)
    if (state === 'corrupt' || state === 'schema') this.#rebuild(failure.message)
    else this.#openReader(failure)
  }

  /**
   * A writer reading only (or unavailable) tries to open the file for
   * writing again — the disk may have space, the lock may be gone — on the
   * 1st, 2nd, 4th, … refused write (counted, so a lasting failure costs a
   * few opens, not one per write).
   */
  #reopen(): void {
    this.#release()
    this.#problem = undefined
    this.#skipped = 0
    this.#open()
    this.#reopenAfter = this.#writer === undefined ? Math.min(this.#reopenAfter * 2, 1024) : 1
  }

  #rebuild(reason: string): void {
    // Removing and recreating the file writes in its directory: never through a linked one.
    const outside = this.#directoryProblem()
    if (outside !== undefined) {
      this.#damaged = false
      this.#unavailable(outside)
      return
    }
    this.#release()
    this.#damaged = false
    this.rebuilds++
    this.#logger().warn(
      `dsh: the projection cache at ${this.path} is unusable (${reason}); rebuilding it empty. Cold reads fold the log until it refills.`,
    )
    try {
      for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(this.path + suffix, { force: true })
    } catch (error) {
      this.#unavailable(this.#failure(failureState(error), 'Rebuilding', error))
      return
    }
    const again = this.#openWriter()
    if (again !== undefined) this.#unavailable(again)
  }

  /** Nothing can be read: reported once per open, reads miss and writes fail softly. */
  #unavailable(problem: SessionProjectionCacheError): void {
    this.#drop(problem)
    this.#logger().warn(
      `dsh: the projection cache at ${this.path} cannot be opened; running without it (reads miss, writes are skipped).`,
      problem,
    )
  }

  #drop(problem: SessionProjectionCacheError): void {
    this.#release()
    this.#problem = problem
  }

  #failure(state: CacheFileState, doing: string, cause: unknown): SessionProjectionCacheError {
    const detail = cause instanceof Error ? `: ${cause.message}` : ''
    return new SessionProjectionCacheError(
      'SESSION_PROJECTION_CACHE_UNAVAILABLE',
      `${doing} the projection cache at ${this.path} failed (${state})${detail}. The file is left as it is${state === 'corrupt' || state === 'schema' ? ' until a writer rebuilds it' : ''}; what the cache cannot answer is folded from the logs.`,
      { details: { path: this.path, state }, ...(cause === undefined ? {} : { cause }) },
    )
  }

  /**
   * Why the directory holding the file must not be written: it is a
   * symbolic link (the file, its WAL companions and a rebuild's new file
   * would land wherever it points, outside the root) or not a directory.
   * `undefined` when it is a directory, or cannot be looked at (missing:
   * the open that follows says so).
   */
  #directoryProblem(): SessionProjectionCacheError | undefined {
    const dir = dirname(this.path)
    let link: boolean
    try {
      const stats = lstatSync(dir)
      if (stats.isDirectory()) return undefined
      link = stats.isSymbolicLink()
    } catch {
      return undefined
    }
    const reason = link
      ? `${dir} is a symbolic link; the derived files of a root stay inside it: replace the link with a directory, or remove it (the next command that writes the root recreates the cache)`
      : `${dir} is not a directory; the derived files of a root are kept in a directory there: remove it (the next command that writes the root recreates the cache)`
    return this.#failure('not-a-directory', 'Opening', new Error(reason))
  }

  /**
   * Opens the file for writing (creating it, and its directory, when
   * missing) and validates it. `undefined` when it is ours, sound and
   * writable; otherwise the typed reason, nothing removed.
   */
  #openWriter(): SessionProjectionCacheError | undefined {
    let db: Database.Database | undefined
    try {
      // Private like the logs it summarises: a directory created here is 0700, the file and its WAL companions 0600.
      try {
        mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 })
      } catch (error) {
        // A dangling link or a file in its place fails the mkdir: said as what it is.
        throw this.#directoryProblem() ?? error
      }
      const outside = this.#directoryProblem()
      if (outside !== undefined) throw outside
      makePrivate(this.path)
      db = openSqlite(this.path, { fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
      // SQLite opens a file it cannot write read-only instead of failing.
      if (db.readonly) throw this.#failure('read-only', 'Opening', new Error('the file cannot be written'))
      // WAL: readers never wait for the background writer. NORMAL sync: a
      // power cut may lose the latest rows, which only makes the cache lag.
      db.pragma('journal_mode = WAL')
      db.pragma('synchronous = NORMAL')
      const opened = db
      const problem = opened.transaction(() => identityProblem(opened, true)).immediate()
      if (problem !== undefined) throw this.#failure(problem.state, 'Opening', new Error(problem.reason))
      const check = this.#check ? db.pragma('quick_check', { simple: true }) : 'ok'
      if (check !== 'ok') throw this.#failure('corrupt', 'Checking', new Error(`quick_check reports ${JSON.stringify(check)}`))
      this.#prepare(db)
      this.#db = db
      this.#problem = undefined
      return undefined
    } catch (error) {
      closeQuietly(db)
      return error instanceof SessionProjectionCacheError ? error : this.#failure(failureState(error), 'Opening', error)
    }
  }

  /**
   * Opens the file read-only, if it exists: reads only, nothing created or
   * changed. `writerProblem` is why a writer reads only (kept as the reason
   * its writes fail); without a readable file that reason (or the reader's)
   * makes the cache unavailable.
   */
  #openReader(writerProblem: SessionProjectionCacheError | undefined): void {
    let db: Database.Database | undefined
    try {
      if (!existsSync(this.path)) throw this.#failure('missing', 'Opening', new Error('there is no cache file'))
      db = openSqlite(this.path, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
      const problem = identityProblem(db, false)
      if (problem !== undefined) throw this.#failure(problem.state, 'Opening', new Error(problem.reason))
      this.#select = selectStatement(db)
      this.#db = db
      this.#problem = writerProblem ?? this.#failure('read-only', 'Writing', new Error('it was opened read-only'))
      if (writerProblem !== undefined)
        this.#logger().warn(
          `dsh: the projection cache at ${this.path} cannot be written (${failureState(writerProblem)}); reading it, writes are skipped until it can.`,
          writerProblem,
        )
    } catch (error) {
      closeQuietly(db)
      const problem = error instanceof SessionProjectionCacheError ? error : this.#failure(failureState(error), 'Opening', error)
      // A read-only host without a cache file simply has none: no warning.
      if (this.readOnly && failureState(problem) === 'missing') this.#drop(problem)
      else this.#unavailable(writerProblem ?? problem)
    }
  }

  #prepare(db: Database.Database): void {
    this.#select = selectStatement(db)
    const deleteOther = db.prepare<[string, string, number]>(
      'DELETE FROM checkpoint_rows WHERE session_id = ? AND (identity <> ? OR inherited_event_count <> ?)',
    )
    const upsert = db.prepare<[string, string, string, number, number, number, number, string]>(`
      INSERT INTO checkpoint_rows (session_id, key, identity, inherited_event_count, state_version, seq, failed, payload)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (session_id, key) DO UPDATE SET
        identity = excluded.identity,
        inherited_event_count = excluded.inherited_event_count,
        state_version = excluded.state_version,
        seq = excluded.seq,
        failed = excluded.failed,
        payload = excluded.payload`)
    const deleteSession = db.prepare<[string]>('DELETE FROM checkpoint_rows WHERE session_id = ?')
    const storeCursor = db.prepare<[string]>('INSERT OR REPLACE INTO feed_cursor (one, cursor) VALUES (1, ?)')
    const cursor = db.prepare<[], string>('SELECT cursor FROM feed_cursor').pluck(true)
    // Both answered from the primary key's first column: one seek per id, one entry per session.
    const heldAll = db.prepare<[], string>('SELECT DISTINCT session_id FROM checkpoint_rows').pluck(true)
    const holds = db.prepare<[string], number>('SELECT 1 FROM checkpoint_rows WHERE session_id = ? LIMIT 1').pluck(true)
    this.#writer = {
      checkpoint: db.transaction((sessionId: string, identity: string, cut: number, rows: readonly EncodedRow[]) => {
        deleteOther.run(sessionId, identity, cut)
        for (const row of rows) upsert.run(sessionId, row.key, identity, cut, row.stateVersion, row.seq, row.failed ? 1 : 0, row.payload)
      }),
      forget: db.transaction((ids: readonly string[], feedCursor: string) => {
        for (const id of ids) deleteSession.run(id)
        storeCursor.run(feedCursor)
      }),
      held: (among) => (among === undefined ? heldAll.all() : among.filter((id) => holds.get(id) !== undefined)),
      cursor: () => cursor.get(),
    }
  }
}

/**
 * Whether `db` is ours at this schema version, or what it is instead. An
 * empty database (a new file) gets the table when `create`, and is
 * `missing` (no cache yet) otherwise.
 */
function identityProblem(db: Database.Database, create: boolean): { state: CacheFileState; reason: string } | undefined {
  const appId = db.pragma('application_id', { simple: true })
  const version = db.pragma('user_version', { simple: true })
  if (appId === 0 && version === 0) {
    const objects = db.prepare('SELECT count(*) FROM sqlite_schema').pluck().get()
    if (objects !== 0) return { state: 'corrupt', reason: 'it holds tables of another application' }
    if (!create) return { state: 'missing', reason: 'the file holds no cache yet' }
    db.exec(SCHEMA)
    return undefined
  }
  if (appId !== APPLICATION_ID) return { state: 'corrupt', reason: `its application_id ${String(appId)} is not a dsh projection cache` }
  if (version !== CACHE_SCHEMA_VERSION)
    return { state: 'schema', reason: `its schema version is ${String(version)}, this build uses ${CACHE_SCHEMA_VERSION}` }
  return undefined
}

function selectStatement(db: Database.Database): Database.Statement<[string, string], StoredPayload> {
  return db.prepare<[string, string], StoredPayload>('SELECT payload FROM checkpoint_rows WHERE session_id = ? AND key = ?').pluck(true)
}

function closeQuietly(db: Database.Database | undefined): void {
  try {
    db?.close()
  } catch {
    // A failed handle may fail to close; nothing more to release.
  }
}

/**
 * Creates the file empty with mode 0600 (SQLite gives its -wal and -shm
 * files the database file's mode), or narrows an existing one and its
 * companions to 0600. Best effort on files this user cannot chmod. Throws
 * when the file cannot be created (a full disk, a read-only file system).
 */
function makePrivate(path: string): void {
  if (!existsSync(path)) {
    try {
      closeSync(openSync(path, 'wx', 0o600))
    } catch (error) {
      // Another process created it first: narrowed below.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      if ((statSync(path + suffix).mode & 0o077) !== 0) chmodSync(path + suffix, 0o600)
    } catch {
      // Missing (no WAL yet) or not ours.
    }
  }
}
