import { chmodSync, closeSync, existsSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'

const require = createRequire(import.meta.url)
/**
 * better-sqlite3 is CommonJS: required, not imported. An ESM import of a
 * CommonJS module makes Node load its CommonJS lexer and scan the module's
 * source for named exports, a cost every command opening an index would pay.
 */
const Database: typeof BetterSqlite3 = require('better-sqlite3')
type Database = BetterSqlite3.Database

/**
 * The addon better-sqlite3 installed, handed to it as `nativeBinding`: the
 * first of `build/`, `build/Debug/`, `build/Release/` (beside its `lib/`)
 * holding `better_sqlite3.node`, the order its own lookup tries them in;
 * `undefined` where an install put it elsewhere, and better-sqlite3 then
 * finds it as usual. That lookup (the `bindings` package) walks a stack
 * trace and tries each directory with a failing `require`: about 1.5 ms of
 * every command that opens an index (`dsh sessions` on an unchanged root).
 */
export function installedAddon(packageMain: string): string | undefined {
  const build = join(dirname(packageMain), '..', 'build')
  return [build, join(build, 'Debug'), join(build, 'Release')]
    .map((dir) => join(dir, 'better_sqlite3.node'))
    .find((path) => existsSync(path))
}

const nativeBinding = installedAddon(require.resolve('better-sqlite3'))

function openDatabase(path: string): Database {
  return new Database(path, nativeBinding === undefined ? {} : { nativeBinding })
}

/** Bumped whenever the layout changes: a file of another version is rebuilt. */
export const INDEX_SCHEMA_VERSION = 2
/** "dshq": tells our file apart from any other SQLite database at the same path. */
const APPLICATION_ID = 0x64736871

/** Why an index is being built from nothing. */
export type RebuildReason = 'missing' | 'corrupt' | 'schema' | 'requested'

/** SQLite result codes that mean the file itself is damaged: the cure is a rebuild, not a retry. */
const DAMAGED = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_CORRUPT_INDEX', 'SQLITE_CORRUPT_SEQUENCE', 'SQLITE_CORRUPT_VTAB'])

export function isDamage(error: unknown): boolean {
  return error instanceof Database.SqliteError && DAMAGED.has(error.code)
}

const SCHEMA = `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  -- One row per session the index knows: the header facts a listing needs,
  -- the persisted revision that listing reports, and which prefix of the log
  -- the event text reflects.
  CREATE TABLE sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    parent TEXT,
    origin TEXT,
    cwd TEXT,
    header TEXT NOT NULL,
    inherited INTEGER NOT NULL,
    -- The revision persistence listed; NULL while only a live session of this process is known.
    revision TEXT,
    -- The persisted revision whose body the event rows were checked against (NULL: not yet).
    body_revision TEXT,
    -- 'indexed' or 'corrupt' (the log at body_revision cannot be read).
    body_state TEXT NOT NULL DEFAULT 'indexed',
    -- The indexed prefix of the log: its length and a digest of its last event.
    event_count INTEGER NOT NULL DEFAULT 0,
    last_event TEXT,
    -- CRC32 over id, header, inherited and revision: content damage that
    -- SQLite's structural checks cannot see is detected on read.
    crc INTEGER NOT NULL
  );
  CREATE INDEX sessions_by_parent ON sessions (parent, created_at, id);
  CREATE INDEX sessions_by_origin ON sessions (origin, created_at, id);
  CREATE INDEX sessions_by_cwd ON sessions (cwd, created_at, id);
  CREATE INDEX sessions_by_created ON sessions (created_at, id);
  -- Text-bearing events; their rowid is the rowid of their text in event_text.
  CREATE TABLE events (
    rowid INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL
  );
  CREATE INDEX events_by_session ON events (sid, seq);
  -- Sessions whose body must be (re)read before the index is current for them
  -- (named by the change feed, listed at a revision their body was not read at,
  -- or gone cold in a process). Written in the transaction that advances the
  -- feed cursor (meta 'feed'), so no change the cursor passed is ever lost.
  CREATE TABLE pending (id TEXT PRIMARY KEY) WITHOUT ROWID;
  CREATE VIRTUAL TABLE event_text USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
  PRAGMA application_id = ${APPLICATION_ID};
  PRAGMA user_version = ${INDEX_SCHEMA_VERSION};
`

export interface OpenedIndex {
  readonly db: Database
  /** Set when the file was created from nothing; the caller then runs a full reconciliation. */
  readonly rebuild?: RebuildReason
}

export interface OpenIndexOptions {
  /**
   * Run `PRAGMA quick_check` (a pass over every page) before trusting the
   * file: for `dsh verify` and `dsh reindex`. An ordinary open checks only the
   * file's identity and schema version; damage inside is found by the
   * statements that meet it (SQLite reports it, row checksums catch the rest)
   * and cured by a rebuild then.
   */
  readonly check?: boolean
}

/**
 * Opens the index file at `path`. A missing file is created; a file that is
 * garbage, another application's or of another schema version (or, with
 * `check`, fails `quick_check`) is deleted and created again. The index is
 * derived data, so starting over only costs a rebuild. The file and its
 * WAL companions are private (0600) and a directory created for it is 0700.
 */
export function openIndexFile(path: string, options: OpenIndexOptions = {}): OpenedIndex {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  if (!existsSync(path)) {
    // A WAL left beside a deleted database must not be replayed into the new one.
    removeIndexFile(path)
    return { db: create(path), rebuild: 'missing' }
  }
  let reason: RebuildReason | undefined
  let db: Database | undefined
  try {
    makePrivate(path)
    db = openDatabase(path)
    tune(db)
    if (db.pragma('application_id', { simple: true }) !== APPLICATION_ID) reason = 'corrupt'
    else if (db.pragma('user_version', { simple: true }) !== INDEX_SCHEMA_VERSION) reason = 'schema'
    else if (options.check === true && db.pragma('quick_check', { simple: true }) !== 'ok') reason = 'corrupt'
  } catch {
    reason = 'corrupt'
  }
  if (reason === undefined && db !== undefined) return { db }
  try {
    db?.close()
  } catch {
    // A damaged handle may fail to close; the file is removed either way.
  }
  removeIndexFile(path)
  return { db: create(path), rebuild: reason ?? 'corrupt' }
}

/** `quick_check` of an open index: `'ok'` or SQLite's first complaint. */
export function quickCheck(db: Database): string {
  try {
    return String(db.pragma('quick_check', { simple: true }))
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

/** Deletes the index file and its WAL companions. */
export function removeIndexFile(path: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(path + suffix, { force: true })
}

function create(path: string): Database {
  // Created empty and private first: SQLite gives its -wal and -shm files the database file's mode.
  closeSync(openSync(path, 'wx', 0o600))
  const db = openDatabase(path)
  // Ids are ordered and compared with the BINARY collation, a memcmp of the
  // stored text: in UTF-8 that is code point order, the order of ids
  // everywhere in dsh (`compareSessionIds`); in UTF-16 it would not be. Set
  // before anything is written, while the encoding can still be chosen.
  db.pragma("encoding = 'UTF-8'")
  tune(db)
  db.exec('BEGIN')
  db.exec(SCHEMA)
  db.prepare('INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)').run('epoch', randomEpoch(), 'generation', '0')
  db.exec('COMMIT')
  return db
}

/**
 * Narrows an existing file (and its WAL companions) to 0600: the index holds
 * plain event text. Best effort: a file this user cannot chmod is not one it
 * created, and opening it fails on its own terms.
 */
function makePrivate(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      if ((statSync(path + suffix).mode & 0o077) !== 0) chmodSync(path + suffix, 0o600)
    } catch {
      // Missing (no WAL yet) or not ours.
    }
  }
}

function tune(db: Database): void {
  db.pragma('journal_mode = WAL')
  // Derived data: losing the last transactions to a power cut only costs a
  // re-read, and damage is detected and rebuilt on open.
  db.pragma('synchronous = OFF')
  db.pragma('busy_timeout = 5000')
}

function randomEpoch(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`
}
