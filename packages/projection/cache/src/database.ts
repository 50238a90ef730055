import { chmodSync, closeSync, existsSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Logger } from '@dsh/context'
import Database from 'better-sqlite3'
import { SessionProjectionCacheError } from './errors.js'

/** Bumped whenever the table layout changes: a file of another version is rebuilt. */
export const CACHE_SCHEMA_VERSION = 2
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
  PRAGMA application_id = ${APPLICATION_ID};
  PRAGMA user_version = ${CACHE_SCHEMA_VERSION};
`

/** Errors that mean the file itself is damaged: the cure is a rebuild, not a retry. */
const DAMAGED = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_CORRUPT_INDEX', 'SQLITE_CORRUPT_SEQUENCE', 'SQLITE_CORRUPT_VTAB'])

/**
 * The checkpoint table in one SQLite file. A file that is garbage, truncated,
 * damaged, another application's or another schema version's is deleted and
 * recreated empty: the cache is derived data, so a rebuild only costs misses.
 * When even a rebuild fails the database is unavailable: reads miss and
 * writes fail softly.
 */
export class CheckpointDatabase {
  readonly path: string
  #db: Database.Database | undefined
  #select: Database.Statement<[string, string], StoredPayload> | undefined
  #write: ((sessionId: string, identity: string, cut: number, rows: readonly EncodedRow[]) => void) | undefined
  readonly #logger: () => Logger
  readonly #check: boolean
  rebuilds = 0

  /**
   * `check` runs SQLite's `quick_check` (a pass over every page) on open: for
   * `dsh verify`, not for every command. Without it, damage inside the file
   * is found by the statement that meets it, and the file is rebuilt then.
   */
  constructor(path: string, logger: () => Logger, check = false) {
    this.path = path
    this.#logger = logger
    this.#check = check
    this.#open()
  }

  /**
   * Runs `quick_check` now: `'ok'`, or SQLite's complaint, after which the
   * file has been rebuilt empty. `'unavailable'` when no database is open.
   */
  check(): string {
    const db = this.#db
    if (db === undefined) return 'unavailable'
    let result: string
    try {
      result = String(db.pragma('quick_check', { simple: true }))
    } catch (error) {
      result = error instanceof Error ? error.message : String(error)
    }
    if (result !== 'ok') this.#rebuild(`quick_check reports ${JSON.stringify(result)}`)
    return result
  }

  get available(): boolean {
    return this.#db !== undefined
  }

  /**
   * One point lookup by primary key: the payload, whatever lifecycle it was
   * written for (the caller checks its witness), or `undefined`. A damaged
   * file is rebuilt, then the error is rethrown (the caller misses).
   */
  read(sessionId: string, key: string): StoredPayload | undefined {
    const select = this.#select
    if (!select) return undefined
    try {
      return select.get(sessionId, key)
    } catch (error) {
      this.#afterFailure(error)
      throw error
    }
  }

  /**
   * Stores the rows of one session's checkpoint in one transaction. Rows of
   * another lifecycle or cut are deleted first (one checkpoint per session).
   * The last write wins: the scheduler keeps writes of one session in order,
   * and a lifecycle recreated with an identical header (indistinguishable by
   * its witness) must replace its predecessor's rows, not be masked by them.
   */
  write(sessionId: string, identity: string, inheritedEventCount: number, rows: readonly EncodedRow[]): void {
    if (!this.#write)
      throw new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_UNAVAILABLE',
        `The projection cache database at ${this.path} is unavailable (it could not be opened or rebuilt, or it is closed).`,
      )
    try {
      this.#write(sessionId, identity, inheritedEventCount, rows)
    } catch (error) {
      this.#afterFailure(error)
      throw error
    }
  }

  close(): void {
    const db = this.#db
    this.#db = undefined
    this.#select = undefined
    this.#write = undefined
    try {
      db?.close()
    } catch (error) {
      this.#logger().warn(`dsh: closing the projection cache at ${this.path} failed.`, error)
    }
  }

  #open(): void {
    try {
      // Private like the logs it summarises: a directory created here is 0700, the file and its WAL companions 0600.
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 })
    } catch (error) {
      this.#unavailable(error)
      return
    }
    const reason = this.#tryOpen()
    if (reason === undefined) return
    this.#rebuild(reason)
  }

  #rebuild(reason: string): void {
    this.close()
    this.rebuilds++
    this.#logger().warn(
      `dsh: the projection cache at ${this.path} is unusable (${reason}); rebuilding it empty. Cold reads fold the log until it refills.`,
    )
    try {
      for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(this.path + suffix, { force: true })
    } catch (error) {
      this.#unavailable(error)
      return
    }
    const again = this.#tryOpen()
    if (again !== undefined) this.#unavailable(new Error(again))
  }

  #unavailable(cause: unknown): void {
    this.close()
    this.#logger().warn(
      `dsh: the projection cache at ${this.path} cannot be opened; running without it (reads miss, writes are skipped).`,
      new SessionProjectionCacheError(
        'SESSION_PROJECTION_CACHE_UNAVAILABLE',
        `The projection cache database at ${this.path} could not be opened or rebuilt.`,
        { cause },
      ),
    )
  }

  /** Opens and validates the file; returns why it must be rebuilt, or `undefined` when it is ours and sound. */
  #tryOpen(): string | undefined {
    let db: Database.Database | undefined
    try {
      makePrivate(this.path)
      db = new Database(this.path, { timeout: 2_000 })
      // WAL: readers never wait for the background writer. NORMAL sync: a
      // power cut may lose the latest rows, which only makes the cache lag.
      db.pragma('journal_mode = WAL')
      db.pragma('synchronous = NORMAL')
      const opened = db
      const problem = opened
        .transaction((): string | undefined => {
          const appId = opened.pragma('application_id', { simple: true })
          const version = opened.pragma('user_version', { simple: true })
          if (appId === 0 && version === 0) {
            const objects = opened.prepare('SELECT count(*) FROM sqlite_schema').pluck().get()
            if (objects !== 0) return 'it holds tables of another application'
            opened.exec(SCHEMA)
            return undefined
          }
          if (appId !== APPLICATION_ID) return `its application_id ${String(appId)} is not a dsh projection cache`
          if (version !== CACHE_SCHEMA_VERSION) return `its schema version is ${String(version)}, this build uses ${CACHE_SCHEMA_VERSION}`
          return undefined
        })
        .immediate()
      if (problem !== undefined) {
        db.close()
        return problem
      }
      const check = this.#check ? db.pragma('quick_check', { simple: true }) : 'ok'
      if (check !== 'ok') {
        db.close()
        return `quick_check reports ${JSON.stringify(check)}`
      }
      this.#prepare(db)
      this.#db = db
      return undefined
    } catch (error) {
      try {
        db?.close()
      } catch {
        // Already unusable; the rebuild removes the file anyway.
      }
      return error instanceof Error ? error.message : String(error)
    }
  }

  #prepare(db: Database.Database): void {
    this.#select = db
      .prepare<[string, string], StoredPayload>('SELECT payload FROM checkpoint_rows WHERE session_id = ? AND key = ?')
      .pluck(true)
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
    this.#write = db.transaction((sessionId: string, identity: string, cut: number, rows: readonly EncodedRow[]) => {
      deleteOther.run(sessionId, identity, cut)
      for (const row of rows) upsert.run(sessionId, row.key, identity, cut, row.stateVersion, row.seq, row.failed ? 1 : 0, row.payload)
    })
  }

  /** A damaged file found mid-flight is rebuilt at once, so the next write lands in a sound file. */
  #afterFailure(error: unknown): void {
    const code = (error as { code?: unknown } | null)?.code
    if (typeof code === 'string' && DAMAGED.has(code)) this.#rebuild(`SQLite reported ${code}`)
  }
}

/**
 * Creates the file empty with mode 0600 (SQLite gives its -wal and -shm
 * files the database file's mode), or narrows an existing one and its
 * companions to 0600. Best effort on files this user cannot chmod.
 */
function makePrivate(path: string): void {
  if (!existsSync(path)) {
    try {
      closeSync(openSync(path, 'wx', 0o600))
    } catch {
      // Another process created it first: narrowed below.
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
