import { chmodSync, existsSync, lstatSync, mkdirSync, statfsSync, statSync } from 'node:fs'
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

function openDatabase(path: string, options: BetterSqlite3.Options): Database {
  return new Database(path, nativeBinding === undefined ? options : { ...options, nativeBinding })
}

/** Bumped whenever the layout changes: a file of another version is rebuilt. */
export const INDEX_SCHEMA_VERSION = 2
/** "dshq": tells our file apart from any other SQLite database at the same path. */
const APPLICATION_ID = 0x64736871

/** Why an index is being built from nothing. */
export type RebuildReason = 'missing' | 'corrupt' | 'schema' | 'requested'

/**
 * Why an index cannot be used right now. `missing`, `corrupt` (not an
 * SQLite file, another application's, damaged) and `schema` (another
 * version) are cured by a rebuild; `full` (no space left), `read-only` (a
 * read-only file system or file), `locked` (another connection holds it
 * exclusively) and `io` (any other failure to open or read it) are not: the
 * file is sound, or unknown, and is left as it is. `not-a-directory` (the
 * directory holding the index is a symbolic link, or not a directory) is
 * not either: nothing is created or written there until it is a directory.
 */
export type IndexState = RebuildReason | 'full' | 'read-only' | 'locked' | 'io' | 'not-a-directory'

/** A failure to open or use the index file, with what it means. */
export class IndexOpenError extends Error {
  readonly state: Exclude<IndexState, 'requested'>
  constructor(state: Exclude<IndexState, 'requested'>, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.state = state
  }
}

/** SQLite result codes that mean the file itself is damaged: the cure is a rebuild, not a retry. */
const DAMAGED = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_CORRUPT_INDEX', 'SQLITE_CORRUPT_SEQUENCE', 'SQLITE_CORRUPT_VTAB'])

export function isDamage(error: unknown): boolean {
  return error instanceof Database.SqliteError && DAMAGED.has(error.code)
}

/**
 * What a failure of SQLite (or of the file system under it) says about the
 * index: damage is `corrupt`; a full disk, a read-only file system, a lock
 * and every other I/O failure are reported as what they are, never as damage.
 */
export function stateOf(error: unknown): Exclude<IndexState, 'requested' | 'missing' | 'schema'> {
  if (error instanceof IndexOpenError && error.state !== 'missing' && error.state !== 'schema') return error.state
  const code = String((error as { code?: unknown }).code ?? '')
  if (isDamage(error)) return 'corrupt'
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return 'full'
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS') return 'read-only'
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'locked'
  return 'io'
}

/**
 * `error` as an `IndexOpenError` (classified by `stateOf`), naming `file` and
 * what was being done. SQLite reports some writes that found no space (its
 * shared-memory file growing) as plain I/O errors: an I/O error on a file
 * system with less than 1 MiB left is `full`.
 */
export function openFailure(error: unknown, file: string, doing: string): IndexOpenError {
  if (error instanceof IndexOpenError) return error
  let state = stateOf(error)
  if (state === 'io' && noSpaceLeft(file)) state = 'full'
  const detail = error instanceof Error ? error.message : String(error)
  return new IndexOpenError(state, `${doing} the index ${file} failed (${state}): ${detail}`, { cause: error })
}

/**
 * Why `dir`, the directory an index is written in, must not be written:
 * it is a symbolic link (what a writer creates or changes there, generations,
 * the path's link, WAL companions, would land wherever it points, outside
 * the root) or not a directory. `undefined` when it is a directory, or
 * cannot be looked at (missing: the open or create that follows says so).
 */
export function indexDirectoryProblem(dir: string): IndexOpenError | undefined {
  let link: boolean
  try {
    const stats = lstatSync(dir)
    if (stats.isDirectory()) return undefined
    link = stats.isSymbolicLink()
  } catch {
    return undefined
  }
  return new IndexOpenError(
    'not-a-directory',
    link
      ? `${dir} is a symbolic link; the derived files of a root stay inside it: replace the link with a directory, or remove it and run dsh reindex.`
      : `${dir} is not a directory; the derived files of a root are kept in a directory there: remove it and run dsh reindex.`,
  )
}

/**
 * Creates the directory that holds the index (0700, private like the logs)
 * when missing, and makes sure it is one (`indexDirectoryProblem`): a
 * symbolic link already there is never written through.
 */
export function createIndexDirectory(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  } catch (error) {
    // A dangling link or a file in its place fails the mkdir: said as what it is.
    throw indexDirectoryProblem(dir) ?? error
  }
  const problem = indexDirectoryProblem(dir)
  if (problem !== undefined) throw problem
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

/**
 * Opens an existing index file for reading only: no file is created,
 * changed or removed (on a read-only file system too). Throws an
 * `IndexOpenError`: `missing`, `corrupt`, `schema`, or what kept it from
 * being read (`locked`, `io`, ...).
 */
export function openReader(file: string): Database {
  let db: Database | undefined
  try {
    db = openDatabase(file, { readonly: true, fileMustExist: true })
    db.pragma('busy_timeout = 5000')
    checkIdentity(db, file)
    return db
  } catch (error) {
    closeQuietly(db)
    if ((error as { code?: unknown }).code === 'SQLITE_CANTOPEN' && !existsSync(file))
      throw new IndexOpenError('missing', `There is no index at ${file}.`, { cause: error })
    throw openFailure(error, file, 'Opening')
  }
}

export interface OpenWriterOptions {
  /** Run `PRAGMA quick_check` (a pass over every page) before trusting the file: for `dsh verify` and `dsh reindex`. */
  readonly check?: boolean
}

/**
 * Opens an existing index file for writing, in WAL mode (readers never wait
 * for this writer, nor it for them). Nothing is removed: a file that cannot
 * be used throws an `IndexOpenError` saying why (`corrupt` or `schema`: a
 * rebuild replaces it; `full`, `read-only`, `locked`, `io`,
 * `not-a-directory`: it stays as it is, and the caller reads it as a reader
 * would).
 */
export function openWriter(file: string, options: OpenWriterOptions = {}): Database {
  let db: Database | undefined
  try {
    // Writing changes the file and creates its companions beside it: never through a linked directory.
    const outside = indexDirectoryProblem(dirname(file))
    if (outside !== undefined) throw outside
    makePrivate(file)
    db = openDatabase(file, { fileMustExist: true })
    db.pragma('busy_timeout = 5000')
    // SQLite opens a file it cannot write read-only (a read-only mount) instead of failing.
    if (db.readonly) throw new IndexOpenError('read-only', `The index ${file} cannot be written (read-only file or file system).`)
    checkIdentity(db, file)
    if (options.check === true) {
      const problem = quickCheck(db)
      if (problem !== 'ok') throw new IndexOpenError('corrupt', `The index ${file} fails quick_check: ${problem}`)
    }
    tune(db)
    try {
      // WAL mode needs its shared-memory file to grow: proven by a read, or the file goes back to rest.
      db.prepare("SELECT value FROM meta WHERE key = 'feed'").get()
    } catch (error) {
      atRest(db)
      throw error
    }
    return db
  } catch (error) {
    closeQuietly(db)
    if ((error as { code?: unknown }).code === 'SQLITE_CANTOPEN' && !existsSync(file))
      throw new IndexOpenError('missing', `There is no index at ${file}.`, { cause: error })
    throw openFailure(error, file, 'Opening')
  }
}

/**
 * The `meta` key a build writes with the schema and removes once its
 * generation is published (`publishedBuild`): a file that still carries it
 * was never made the index.
 */
const BUILDING = 'building'

/**
 * Fills `file`, a new generation the caller created empty and private (0600:
 * SQLite gives its companions the database file's mode), with an empty
 * index, for a build: rollback journal kept in memory and no syncs while it
 * is filled (a failed build removes the whole file). The connection holds
 * the file exclusively from before its first write until it closes, which a
 * build does only once the file is published or removed: a writer looking
 * for what a killed build left (`abandonedBuild`) tells a build running now,
 * in any process, by that lock. Closed, it is at rest: its journal was in
 * memory, so it leaves no companion.
 */
export function createIndex(file: string): Database {
  const db = openDatabase(file, { fileMustExist: true })
  try {
    // Exclusive locking mode: the lock taken by BEGIN EXCLUSIVE is kept after every commit.
    db.pragma('locking_mode = EXCLUSIVE')
    // Ids are ordered and compared with the BINARY collation, a memcmp of the
    // stored text: in UTF-8 that is code point order, the order of ids
    // everywhere in dsh (`compareSessionIds`); in UTF-16 it would not be. Set
    // before anything is written, while the encoding can still be chosen.
    db.pragma("encoding = 'UTF-8'")
    db.pragma('journal_mode = MEMORY')
    db.pragma('synchronous = OFF')
    db.exec('BEGIN EXCLUSIVE')
    db.exec(SCHEMA)
    db.prepare('INSERT INTO meta (key, value) VALUES (?, ?), (?, ?), (?, ?)').run('epoch', randomEpoch(), 'generation', '0', BUILDING, '1')
    db.exec('COMMIT')
    return db
  } catch (error) {
    closeQuietly(db)
    throw error
  }
}

/**
 * Removes the build's mark from a finished generation (see `createIndex`),
 * on the build's connection, just before it is synced and published: a
 * build killed between the two leaves a file no sweep removes (a narrow
 * window), where a mark removed after publishing would be a write to the
 * index itself without a journal.
 */
export function publishedBuild(db: Database): void {
  db.prepare('DELETE FROM meta WHERE key = ?').run(BUILDING)
}

/**
 * Whether `file` is what a build left without publishing it, and no build is
 * running on it: our application id, the build's mark still in `meta`, and
 * no connection holding it exclusively (a running build holds it from
 * before its first write until it is published: `createIndex`). A build
 * never takes up a file it did not create, so a file found so is never
 * written again. Opened read-only, waiting for nobody; a file that cannot be
 * read (locked, damaged, unreadable, still empty) is not one. Reads only.
 */
export function abandonedBuild(file: string): boolean {
  let db: Database | undefined
  try {
    db = openDatabase(file, { readonly: true, fileMustExist: true, timeout: 0 })
    if (db.pragma('application_id', { simple: true }) !== APPLICATION_ID) return false
    return db.prepare('SELECT 1 FROM meta WHERE key = ?').get(BUILDING) !== undefined
  } catch {
    return false
  } finally {
    closeQuietly(db)
  }
}

/**
 * Puts the file in the rollback-journal mode it rests in between writers:
 * then a reader opens it without creating anything (a WAL-mode file needs
 * its `-wal` and `-shm`, which a read-only file system cannot create). Only
 * possible while no other connection has it open; otherwise it stays in WAL
 * mode and the last of them leaves the WAL behind for the next writer.
 */
export function atRest(db: Database): boolean {
  try {
    db.pragma('busy_timeout = 0')
    return db.pragma('journal_mode = DELETE', { simple: true }) === 'delete'
  } catch {
    return false
  }
}

/**
 * Whether no connection holds `file` any more: it is opened and put at rest
 * (which removes its WAL companions), without waiting for anyone. False
 * when it is held, damaged or gone.
 */
export function release(file: string): boolean {
  let db: Database | undefined
  try {
    db = openDatabase(file, { fileMustExist: true })
    return atRest(db)
  } catch {
    return false
  } finally {
    closeQuietly(db)
  }
}

/** Switches a built (or at-rest) file to what a writer works in: WAL, no syncs. */
export function tune(db: Database): void {
  db.pragma('journal_mode = WAL')
  // Derived data: losing the last transactions to a power cut only costs a
  // re-read, and damage is detected and rebuilt by the next writer.
  db.pragma('synchronous = OFF')
  db.pragma('busy_timeout = 5000')
}

/** `quick_check` of an open index: `'ok'` or SQLite's first complaint. */
export function quickCheck(db: Database): string {
  try {
    return String(db.pragma('quick_check', { simple: true }))
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

export function closeQuietly(db: Database | undefined): void {
  try {
    db?.close()
  } catch {
    // A damaged or failed handle may fail to close; nothing more to release.
  }
}

/** Our application id and this schema version, or an `IndexOpenError` saying what the file is instead. */
function checkIdentity(db: Database, file: string): void {
  const application = db.pragma('application_id', { simple: true })
  if (application !== APPLICATION_ID)
    throw new IndexOpenError('corrupt', `${file} is not a dsh query index (application id ${String(application)}).`)
  const version = db.pragma('user_version', { simple: true })
  if (version !== INDEX_SCHEMA_VERSION)
    throw new IndexOpenError('schema', `The index ${file} has schema version ${String(version)}; this build uses ${INDEX_SCHEMA_VERSION}.`)
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

function noSpaceLeft(file: string): boolean {
  try {
    const { bavail, bsize } = statfsSync(dirname(file))
    return bavail * bsize < 1024 * 1024
  } catch {
    return false
  }
}

function randomEpoch(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`
}
