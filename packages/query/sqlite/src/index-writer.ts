import { isDshError, type Logger } from '@dsh/context'
import type { Session } from '@dsh/session'
import type { IndexUpkeep } from './body-reads.js'
import { buildIndex } from './build.js'
import { ColdSessions } from './cold-sessions.js'
import { type Connection, connect, type IndexHandle } from './connection.js'
import { IndexDamageError } from './index-store.js'
import type { ReconcileReport, SqliteSessionQueryOptions } from './query-types.js'
import { reconcileIndex } from './reconcile.js'
import { isDamage, openFailure, openWriter, type RebuildReason } from './schema.js'

/** Default of `indexDelayMs`: how long a writer lets changes gather before indexing them. */
const INDEX_DELAY_MS = 200

export interface IndexWriterOptions {
  readonly handle: IndexHandle
  readonly query: SqliteSessionQueryOptions
  readonly logger: Logger
  readonly concurrency: number
  /** Aborts when the query closes. */
  readonly lifetime: AbortSignal
  /** Whether the query is closed: what was read is then not written. */
  readonly closed: () => boolean
  readonly warn: (message: string, error: unknown) => void
}

/**
 * The writer's side of the index, in the process that writes the sessions:
 * it keeps the index current off the append path. Changes are gathered
 * (`schedule`, from the context's session events) and indexed in one pass
 * `indexDelayMs` after the first (`catchUp`): the ids the change feed names
 * since the index's cursor, sessions of this process from memory once
 * flushed, others from their logs. Passes run one at a time (`exclusive`);
 * a missing, damaged or outdated index is built anew and swapped in
 * (`build`). A pass that cannot write (a full disk, a lock) changes
 * nothing and the next one tries again.
 */
export class IndexWriter {
  /** Sessions that went cold here and are not indexed yet: their text comes from memory (bounded: `coldLimit`). */
  readonly cold: ColdSessions
  /** When the last pass finished (ms since the epoch; 0 before any). */
  lastPass = 0
  readonly #options: IndexWriterOptions
  readonly #handle: IndexHandle
  /** The live sessions seen at the last look, to notice those that went cold. */
  #lastLive = new Map<string, Session>()
  #tail: Promise<unknown> = Promise.resolve()
  #timer: NodeJS.Timeout | undefined
  /** When the last pass started: a scheduled pass is skipped when another started after it was asked for. */
  #lastStart = 0
  /** Passes (or builds) running now. */
  #running = 0
  #stopped = false

  constructor(options: IndexWriterOptions) {
    this.#options = options
    this.#handle = options.handle
    this.cold = new ColdSessions(options.query.coldLimit)
    for (const session of options.query.sessions.list()) this.#lastLive.set(session.id, session)
  }

  /** Runs `fn` after every pass before it. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(fn, fn)
    this.#tail = run.catch(() => {})
    return run
  }

  /** Resolves once the passes queued so far settled. */
  async settled(): Promise<void> {
    await this.#tail.catch(() => {})
  }

  /** Schedules a pass `indexDelayMs` after the first change it has not taken yet. */
  schedule(): void {
    if (this.#stopped || this.#timer !== undefined) return
    const asked = performance.now()
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.exclusive(async () => {
        if (this.#lastStart <= asked) await this.catchUp(this.#options.lifetime)
      }).catch((error: unknown) => {
        if (!this.#options.lifetime.aborted)
          this.#options.warn(
            `dsh: the session query index at ${this.#handle.path} could not be brought up to date; queries read what changed from the logs.`,
            error,
          )
      })
    }, this.#options.query.indexDelayMs ?? INDEX_DELAY_MS)
    this.#timer.unref()
  }

  /** Schedules a pass to build an index found missing or unusable, unless a pass running now sees to it. */
  rebuildLater(): void {
    if (this.#running === 0) this.schedule()
  }

  /** No more scheduled passes (the query is closing). */
  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  /** Notes the sessions that left the store since the last look (their text is taken from memory). */
  noticeCold(): void {
    const now = new Map<string, Session>()
    for (const session of this.#options.query.sessions.list()) now.set(session.id, session)
    for (const [id, session] of this.#lastLive) if (now.get(id) !== session) this.cold.hold(session)
    this.#lastLive = now
  }

  /**
   * One pass: the index opened (or built) for writing, then brought up to
   * date through the change feed (`reconcileIndex`). `final` (on close)
   * first flushes every live session holding events the index lacks, so the
   * feed names them, and never builds an index that is not there. Index
   * failures reject with `SESSION_QUERY_INDEX_UNAVAILABLE` and change
   * nothing: the next pass tries again.
   */
  catchUp(signal: AbortSignal | undefined, final = false): Promise<ReconcileReport> {
    return this.#pass(async () => {
      this.#lastStart = performance.now()
      this.noticeCold()
      const cold = this.cold.list()
      let report: ReconcileReport
      try {
        const { conn, built } = await this.#writable(signal, !final)
        if (final) await this.#flushUnindexed(conn)
        report = built ?? (await reconcileIndex(this.upkeep(), undefined, this.#options.query.onProgress, signal ?? neverAborted()))
      } catch (error) {
        if (isDshError(error)) throw error
        if (!(error instanceof IndexDamageError || isDamage(error))) throw this.#handle.unavailable(messageOf(error), error)
        this.#options.logger.warn(`dsh: the session query index at ${this.#handle.path} is damaged; rebuilding it.`, error)
        report = await this.#buildInto('corrupt', signal)
      }
      for (const session of cold) this.cold.release(session)
      this.lastPass = Date.now()
      return report
    })
  }

  /** Builds a new generation (see `buildIndex`), swaps it in and makes it the connection. */
  build(reason: RebuildReason, signal: AbortSignal | undefined): Promise<ReconcileReport> {
    return this.#pass(() => this.#buildInto(reason, signal))
  }

  /** Runs a pass or build holding the index's connections, counted in `#running`. */
  async #pass<T>(fn: () => Promise<T>): Promise<T> {
    this.#running++
    try {
      return await this.#handle.hold(fn)
    } finally {
      this.#running--
    }
  }

  /** What upkeep works on: the sources, sessions this process holds, and the writable store. */
  upkeep(): IndexUpkeep {
    const { query } = this.#options
    const flush = query.sessions.flush?.bind(query.sessions)
    return {
      sessions: query.sessions,
      persistence: query.persistence,
      logger: this.#options.logger,
      readConcurrency: this.#options.concurrency,
      flush,
      known: (id) => query.sessions.get(id) ?? this.cold.get(id),
      store: () => {
        const conn = this.#handle.connection
        if (conn === undefined || !conn.writable) throw this.#handle.unavailable('it is not open for writing')
        return conn.store
      },
      closed: this.#options.closed,
    }
  }

  /** The writable connection to the current generation, building one when there is none to write (missing, damaged, another schema). */
  async #writable(signal: AbortSignal | undefined, build: boolean): Promise<{ conn: Connection; built?: ReconcileReport }> {
    const handle = this.#handle
    const conn = handle.current()
    if (conn?.writable === true) return { conn }
    let reason: RebuildReason
    if (conn !== undefined) {
      // Read-only so far (the disk was full, the file locked): try writing again.
      try {
        return { conn: handle.reopenForWriting(conn) }
      } catch (error) {
        const failure = openFailure(error, conn.file.file, 'Opening')
        if (failure.state !== 'corrupt' && failure.state !== 'schema') throw handle.unavailable(failure.message, failure)
        reason = failure.state
      }
    } else {
      const state = handle.state?.state ?? 'missing'
      if (state !== 'missing' && state !== 'corrupt' && state !== 'schema') throw handle.unavailable(undefined, handle.state)
      reason = state
    }
    if (!build) throw handle.unavailable(`it is ${reason}`, handle.state)
    const built = await this.#buildInto(reason, signal)
    return { conn: handle.connection!, built }
  }

  async #buildInto(reason: RebuildReason, signal: AbortSignal | undefined): Promise<ReconcileReport> {
    const handle = this.#handle
    if (reason !== 'missing' && reason !== 'requested')
      this.#options.logger.warn(`dsh: the session query index at ${handle.path} is being rebuilt (${reason}).`)
    let built: Awaited<ReturnType<typeof buildIndex>>
    try {
      built = await buildIndex({
        path: handle.path,
        upkeep: this.upkeep(),
        reason,
        onProgress: this.#options.query.onProgress,
        signal: signal ?? neverAborted(),
      })
    } catch (error) {
      if (isDshError(error)) throw error
      throw handle.unavailable(`it could not be rebuilt: ${messageOf(error)}`, error)
    }
    if (!handle.writer) {
      handle.current()
      return built.report
    }
    try {
      handle.replace(connect(openWriter(built.file.file), built.file, true))
      handle.state = undefined
    } catch (error) {
      throw handle.unavailable(`the rebuilt index could not be opened: ${messageOf(error)}`, error)
    }
    return built.report
  }

  /**
   * Flushes live sessions holding events the index lacks, so the feed names
   * them and this pass indexes them. A flush that fails leaves its events to
   * a later pass (the coordinator retries them).
   */
  async #flushUnindexed(conn: Connection): Promise<void> {
    const { sessions } = this.#options.query
    if (sessions.flush === undefined) return
    const stale = sessions.list().filter((s) => conn.store.indexedCount(s.id)?.count !== s.seq)
    await Promise.allSettled(stale.map((session) => sessions.flush!(session)))
  }
}

function neverAborted(): AbortSignal {
  return new AbortController().signal
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
