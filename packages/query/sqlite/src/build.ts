import { closeSync, fsyncSync, openSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { consoleLogger, isDshError, type Logger } from '@dsh/context'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { IndexProgress } from '@dsh/session-query'
import { queryError } from '@dsh/session-query/backend'
import type BetterSqlite3 from 'better-sqlite3'
import type { IndexUpkeep } from './body-reads.js'
import { type IndexFile, identify, newGeneration, publish, removeDatabase, removeLeftovers } from './index-file.js'
import { IndexStore } from './index-store.js'
import type { ReconcileReport } from './query-types.js'
import { reconcileIndex } from './reconcile.js'
import { closeQuietly, createIndex, createIndexDirectory, publishedBuild, type RebuildReason, release, stateOf } from './schema.js'

export interface BuildOptions {
  /** The index path (`defaultIndexPath`): the link a finished build is published under. */
  readonly path: string
  /** What to index from, as a reconciliation does (`store` is ignored: the build brings its own). */
  readonly upkeep: Omit<IndexUpkeep, 'store'>
  readonly reason: RebuildReason
  readonly onProgress?: ((progress: IndexProgress) => void) | undefined
  readonly signal: AbortSignal
  /**
   * Awaited after the new file is complete and before it replaces the old
   * one: readers keep using the old index until then (a test holds a
   * rebuild here to query during it).
   */
  readonly beforeSwap?: (() => Promise<void>) | undefined
}

export interface BuiltIndex {
  readonly report: ReconcileReport
  /** The new generation, published under the path, closed and at rest. */
  readonly file: IndexFile
}

/**
 * Builds the index from nothing into a new generation file beside the path
 * (a full reconciliation: every header listed, every body read) and
 * publishes it with one rename (see `publish`). Until then the old index,
 * if any, is untouched and keeps answering readers; the previous generation
 * is removed afterwards (readers still holding it keep their descriptor). A
 * build that fails or is cancelled removes its file and leaves no other
 * trace: the old index stays as it was. One killed before publishing leaves
 * its file, which the next writer removes (`removeLeftovers`): the build's
 * connection holds the file exclusively until it is published (see
 * `createIndex`), so no writer takes a running build for a dead one.
 */
export async function buildIndex(options: BuildOptions): Promise<BuiltIndex> {
  createIndexDirectory(dirname(options.path))
  const file = newGeneration(options.path)
  // Created empty and private; the descriptor stays open until the build's connection is closed, to sync the file
  // without closing a descriptor of it while the connection holds its lock (closing any drops the process's locks).
  const fd = openSync(file, 'wx', 0o600)
  let db: BetterSqlite3.Database | undefined
  let store: IndexStore | undefined
  try {
    db = createIndex(file)
    const built = new IndexStore(db)
    store = built
    const report = await reconcileIndex({ ...options.upkeep, store: () => built }, options.reason, options.onProgress, options.signal)
    await options.beforeSwap?.()
    options.signal.throwIfAborted()
    return { report, file: swapIn(options.path, file, db, fd) }
  } catch (error) {
    // A cancelled build of an index that had none to use (missing, damaged) is published as far as it
    // got once every header is in: what it has not read stays pending, and the next writer resumes there.
    if (options.signal.aborted && options.reason !== 'requested' && db?.open === true && store?.feedCursor() !== undefined) {
      let published = false
      try {
        swapIn(options.path, file, db, fd)
        published = true
      } catch {
        // Not published: removed below like any failed build.
      }
      if (published) throw error
    }
    closeQuietly(db)
    removeDatabase(file)
    throw error
  } finally {
    closeSync(fd)
  }
}

/**
 * Publishes the built `db` (the file `file`, open as `fd`) under `path`,
 * then lets it go: its build mark removed (the last write a build makes:
 * nothing writes the file without a journal once it is the index), synced
 * and published while the build's connection still holds it, then closed;
 * what it replaced and what killed builds left are removed. Nothing after
 * the rename throws but the check that the path still names the file.
 */
function swapIn(path: string, file: string, db: BetterSqlite3.Database, fd: number): IndexFile {
  publishedBuild(db)
  fsyncSync(fd)
  const previous = publish(path, file)
  // The build's journal was in memory and it never used a WAL: closed, it is at rest, with no companion.
  closeQuietly(db)
  try {
    if (previous !== undefined) retire(previous)
    removeLeftovers(path)
  } catch {
    // Only leftovers: the next writer sweeps them.
  }
  const located = identify(path)
  if (located === undefined || located.file !== file) throw new Error(`The new index ${file} was replaced as soon as it was published.`)
  return located
}

/**
 * Removes a generation that was just replaced. Its companions go only when
 * no connection holds the file (then it leaves WAL mode, which removes
 * them); a connection of another process still on it keeps them, and SQLite
 * removes them when its last connection closes.
 */
function retire(file: string): void {
  if (release(file)) removeDatabase(file)
  else rmSync(file, { force: true })
}

export interface BuildIndexFileOptions {
  readonly persistence: SessionPersistence
  /** The index path (`defaultIndexPath(root)`). */
  readonly path: string
  readonly onProgress?: (progress: IndexProgress) => void
  readonly signal?: AbortSignal
  /** Awaited once the new file is complete, before it replaces the old one (readers keep the old one until then). */
  readonly beforeSwap?: () => Promise<void>
  /** Concurrent body reads (default 4). */
  readonly readConcurrency?: number
  readonly logger?: Logger
}

/**
 * Builds a root's index from its logs into a new file and swaps it in with
 * one rename (what `dsh reindex` runs). The old index is never opened for
 * writing: readers and writers keep answering from it while the build runs,
 * notice the swap at their next operation and reopen; writers then catch
 * the new file up from the change-feed cursor it records. A build that fails
 * (a full disk) or is cancelled leaves the old index as it was and removes
 * everything it created.
 */
export async function buildIndexFile(options: BuildIndexFileOptions): Promise<ReconcileReport> {
  const none = { get: () => undefined, list: () => [] }
  let built: BuiltIndex
  try {
    built = await buildIndex({
      path: options.path,
      upkeep: {
        sessions: none,
        persistence: options.persistence,
        logger: options.logger ?? consoleLogger,
        readConcurrency: Math.max(1, options.readConcurrency ?? 4),
        known: () => undefined,
        closed: () => false,
      },
      reason: 'requested',
      onProgress: options.onProgress,
      signal: options.signal ?? new AbortController().signal,
      beforeSwap: options.beforeSwap,
    })
  } catch (error) {
    if (isDshError(error)) throw error
    const state = stateOf(error)
    throw queryError(
      'SESSION_QUERY_INDEX_UNAVAILABLE',
      `Rebuilding the query index at ${options.path} failed (${state}): ${error instanceof Error ? error.message : String(error)}${state === 'not-a-directory' ? ' Nothing was written.' : `. The index in place is unchanged and nothing of the attempt is left; ${state === 'full' ? 'free some space, then ' : ''}run the rebuild again.`}`,
      { cause: error, details: { path: options.path, state } },
    )
  }
  return built.report
}
