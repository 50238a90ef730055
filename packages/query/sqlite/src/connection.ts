import { queryError } from '@dsh/session-query/backend'
import type BetterSqlite3 from 'better-sqlite3'
import { type BudgetedResult, createBudgetedReader, type StatementBudget } from './budget.js'
import { type IndexFile, identify, removeLeftovers } from './index-file.js'
import { IndexStore } from './index-store.js'
import type { ReadStatement } from './read-statements.js'
import { atRest, closeQuietly, IndexOpenError, type IndexState, openFailure, openReader, openWriter } from './schema.js'

/** One open index generation: its connection, store and budgeted reader. */
export interface Connection {
  readonly db: BetterSqlite3.Database
  readonly store: IndexStore
  readonly file: IndexFile
  /** Opened for writing (a writer's connection); false: read-only. */
  readonly writable: boolean
  /** Runs request-serving reads on this connection under a budget. */
  run(statements: readonly ReadStatement[], budget: StatementBudget): BudgetedResult
}

export function connect(db: BetterSqlite3.Database, file: IndexFile, writable: boolean): Connection {
  let reader: ReturnType<typeof createBudgetedReader> | undefined
  return {
    db,
    store: new IndexStore(db),
    file,
    writable,
    // Installed at the first request: upkeep alone never needs it.
    run: (statements, budget) => {
      reader ??= createBudgetedReader(db)
      return reader.run(statements, budget)
    },
  }
}

export interface IndexHandleOptions {
  /** The index path (a link to the current generation, or a plain file). */
  readonly path: string
  /** Open for writing (falling back to reading when the file cannot be written). */
  readonly writer: boolean
  /** Told when the connection moves to another file (the reader worker follows it). */
  readonly onFile: (file: string) => void
  /** Told when the index needs a writer's rebuild (missing, damaged, another schema). */
  readonly onRebuildable: () => void
  /** Reports a writer reading only (once per message). */
  readonly warn: (message: string, error: unknown) => void
}

/**
 * The connection to the generation the index path names now. It is opened
 * on first use and reopened when a rebuild swapped another generation in:
 * every operation starts with `current()`, which compares the path's
 * identity (device and inode of the file it names) with the open one. A
 * replaced connection is closed once no operation holds it (`hold`).
 */
export class IndexHandle {
  readonly path: string
  readonly writer: boolean
  /** Why there is no usable connection (or, for a writer, why it only reads). */
  state: IndexOpenError | undefined
  #warnedFile: string | undefined
  readonly #options: IndexHandleOptions
  #conn: Connection | undefined
  #retired: Connection[] = []
  #held = 0

  constructor(options: IndexHandleOptions) {
    this.path = options.path
    this.writer = options.writer
    this.#options = options
  }

  get connection(): Connection | undefined {
    return this.#conn
  }

  /**
   * The connection to the current generation, `undefined` (and `state`
   * says why) when there is none to use. A writer opens it for writing; one
   * that cannot (full disk, read-only file system, locked) reads it.
   */
  current(): Connection | undefined {
    let located: IndexFile | undefined
    try {
      located = identify(this.path)
    } catch (error) {
      this.state = openFailure(error, this.path, 'Locating')
      this.replace(undefined)
      return undefined
    }
    const conn = this.#conn
    if (conn !== undefined && located !== undefined && conn.file.identity === located.identity) return conn
    if (located === undefined) {
      this.state = new IndexOpenError('missing', `there is no query index at ${this.path}`)
      this.replace(undefined)
      if (this.writer) this.#options.onRebuildable()
      return undefined
    }
    try {
      this.replace(this.#connect(located))
      this.state = undefined
      return this.#conn
    } catch (error) {
      const failure = openFailure(error, located.file, 'Opening')
      // Said once per file and kind of failure: every query of this host reads the logs meanwhile.
      if (this.state?.state !== failure.state || this.#warnedFile !== located.file) {
        this.#warnedFile = located.file
        if (!this.writer)
          this.#options.warn(
            `dsh: the session query index at ${this.path} cannot be read (${failure.state}); answering from the logs. 'dsh reindex' rebuilds it.`,
            failure,
          )
      }
      this.state = failure
      this.replace(undefined)
      return undefined
    }
  }

  /**
   * Opens the current generation for writing in place of a read-only
   * connection (the disk had been full, the file locked). Throws the
   * `IndexOpenError` that keeps it from being written.
   */
  reopenForWriting(conn: Connection): Connection {
    const next = connect(openWriter(conn.file.file), conn.file, true)
    this.replace(next)
    this.#removeLeftovers()
    return next
  }

  /** Makes `next` the connection; the one it replaces is closed once no operation holds it. */
  replace(next: Connection | undefined): void {
    const previous = this.#conn
    if (previous === next) return
    this.#conn = next
    if (previous !== undefined) this.#retired.push(previous)
    if (next !== undefined && next.file.file !== previous?.file.file) this.#options.onFile(next.file.file)
    if (this.#held === 0) this.#closeRetired()
  }

  /** Runs `fn` holding the connections it uses open. */
  async hold<T>(fn: () => Promise<T>): Promise<T> {
    this.#held++
    try {
      return await fn()
    } finally {
      this.#release()
    }
  }

  holdSync<T>(fn: () => T): T {
    this.#held++
    try {
      return fn()
    } finally {
      this.#release()
    }
  }

  /** Closes every connection; a writer's current one is left at rest (see `atRest`). */
  close(): void {
    this.#closeRetired()
    const conn = this.#conn
    this.#conn = undefined
    if (conn === undefined) return
    if (conn.writable) atRest(conn.db)
    closeQuietly(conn.db)
  }

  /** `SESSION_QUERY_INDEX_UNAVAILABLE`: why the index cannot answer (default: why it could not be opened). */
  unavailable(why?: string, cause?: unknown): Error {
    const state: IndexState | undefined = cause instanceof IndexOpenError ? cause.state : this.state?.state
    const reason = why ?? this.state?.message ?? 'it is not open'
    const remedy = this.writer
      ? 'This host rebuilds or catches it up as soon as it can write it; retry then.'
      : "A writer (any dsh command that writes this root) or 'dsh reindex' brings it back; retry then."
    return queryError('SESSION_QUERY_INDEX_UNAVAILABLE', `The session query index at ${this.path} cannot answer: ${reason}. ${remedy}`, {
      cause: cause ?? this.state,
      details: { path: this.path, ...(state === undefined ? {} : { state }) },
    })
  }

  #connect(located: IndexFile): Connection {
    if (this.writer) {
      try {
        const conn = connect(openWriter(located.file), located, true)
        this.#removeLeftovers()
        return conn
      } catch (error) {
        const failure = openFailure(error, located.file, 'Opening')
        // What a rebuild cures, the writer's next pass rebuilds; until then there is nothing to read either.
        if (failure.state === 'corrupt' || failure.state === 'schema' || failure.state === 'missing') {
          this.#options.onRebuildable()
          throw failure
        }
        this.#options.warn(
          `dsh: the session query index at ${this.path} cannot be written (${failure.state}); queries read it and take what changed from the logs until it can.`,
          failure,
        )
      }
    }
    return connect(openReader(located.file), located, false)
  }

  /**
   * Once it holds the index for writing, a writer removes what builds killed
   * before publishing left beside it (see `removeLeftovers`); a reader never does.
   */
  #removeLeftovers(): void {
    try {
      removeLeftovers(this.path)
    } catch {
      // Only leftovers: the next writer tries again.
    }
  }

  #release(): void {
    this.#held--
    if (this.#held === 0) this.#closeRetired()
  }

  #closeRetired(): void {
    for (const old of this.#retired.splice(0)) closeQuietly(old.db)
  }
}
