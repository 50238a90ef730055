import { raceAbort } from '@dsh/context'
import { type AttachmentRef, type SessionHeader, type SessionId, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import type {
  AppendedEvent,
  AppendResult,
  AppendTarget,
  AttachmentPutOptions,
  DeleteOptions,
  LoadedSession,
  PersistedSessionRecord,
  SessionChangeCursor,
  SessionChanges,
  SessionObservation,
  SessionRange,
  SessionRangeObservation,
  SessionRevision,
  SessionSuffixObservation,
  SessionWriter,
} from '@dsh/session-persistence'
import {
  ATTACHMENT_MAX_BYTES,
  checkAppend,
  checkAttachmentSession,
  checkRange,
  expandEventRuns,
  persistenceCancelled,
  persistenceError,
  SessionRepairs,
  type StoredAppendState,
} from '@dsh/session-persistence/backend'
import pg from 'pg'
import { ChangeAnnouncer } from './announcer.js'
import { appendStatement, partitionOf } from './append-statement.js'
import { putAttachment, readAttachment } from './attachments.js'
import { encodeBatch } from './batch-codec.js'
import { type ChangeSubscription, readChanges, subscribeChanges } from './change-feed.js'
import { deleteSession } from './deletion.js'
import { ioError, PostgresPersistenceError } from './errors.js'
import { DEFAULT_FEED_LIMIT, FeedPruner } from './feed-pruning.js'
import { forkReference } from './fork-reference.js'
import { isStorableId, keyOf, type StoredId, storedId } from './ids.js'
import { LogReader, notFound, revisionOf, SESSION_COLUMNS, type SessionRow } from './log-reader.js'
import { poolConfig, watchPool } from './pool.js'
import { SESSIONS_SCHEMA } from './schema.js'
import type { DamagedLog, LogVerification, PostgresPersistence, PostgresPersistenceMetrics, PostgresPersistenceOptions } from './types.js'
import { WriterConnection } from './writer.js'
import { holderNamed } from './writer-identity.js'
import { WRITERS_OF, WriterLookups } from './writer-lookup.js'

/** What this instance keeps of a session it has written, between appends. */
interface WriterState extends StoredAppendState {
  readonly sid: string
  /** The id's bytes and keys, computed once per written session (not per append). */
  readonly stored: StoredId
  /** The number of the partitions that hold the session's rows (`append-statement.ts`). */
  readonly partition: number | undefined
}

/**
 * Opens the PostgreSQL persistence: migrates (unless told not to), then
 * serves the contract. Refuses a database with a newer schema
 * (`POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW`).
 */
export async function createPostgresPersistence(options: PostgresPersistenceOptions): Promise<PostgresPersistence> {
  if (options.pool === undefined && (typeof options.connectionString !== 'string' || options.connectionString.length === 0)) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      'createPostgresPersistence needs a `pool` or a `connectionString` (postgres://user@host:port/database).',
    )
  }
  const maxLeases = options.maxLeases ?? 256
  if (!Number.isSafeInteger(maxLeases) || maxLeases < 1) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      `maxLeases must be a positive integer, got ${String(maxLeases)}.`,
    )
  }
  const feedLimit = options.feedLimit ?? DEFAULT_FEED_LIMIT
  if (!Number.isSafeInteger(feedLimit) || feedLimit < 1) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      `feedLimit must be a positive integer (rows of dsh_changes between two prunings), got ${String(feedLimit)}.`,
    )
  }
  if (options.pool !== undefined && options.connectTimeoutMs !== undefined) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      'connectTimeoutMs bounds the connects of the pool opened from connectionString; a pool you give brings its own (`new pg.Pool({ ...poolConfig(url, { connectTimeoutMs }) })`).',
    )
  }
  const owned = options.pool === undefined
  const pool =
    options.pool ??
    new pg.Pool(
      poolConfig(
        options.connectionString as string,
        options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs },
      ),
    )
  watchPool(pool)
  try {
    await SESSIONS_SCHEMA.open(pool, options.migrate !== false && options.readOnly !== true)
  } catch (error) {
    if (owned) await pool.end().catch(() => {})
    throw error
  }
  const attachmentMaxBytes = options.attachmentMaxBytes ?? ATTACHMENT_MAX_BYTES
  if (!Number.isSafeInteger(attachmentMaxBytes) || attachmentMaxBytes < 1) {
    if (owned) await pool.end().catch(() => {})
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
      `attachmentMaxBytes must be a positive integer, got ${String(attachmentMaxBytes)}.`,
    )
  }
  return new PgPersistence(pool, owned, options.clock ?? Date.now, maxLeases, options.readOnly === true, feedLimit, attachmentMaxBytes)
}

class PgPersistence implements PostgresPersistence {
  readonly pool: pg.Pool
  readonly #owned: boolean
  readonly #clock: () => number
  readonly repairs = new SessionRepairs()
  readonly #writer: WriterConnection
  readonly #reader: LogReader
  readonly #states = new Map<string, WriterState>()
  readonly #metrics: PostgresPersistenceMetrics = {
    headerReads: 0,
    bodyReads: 0,
    bytesRead: 0,
    appends: 0,
    rescans: 0,
    logOpens: 0,
    horizonRescans: 0,
    feedPrunes: 0,
    lockTableReads: 0,
  }
  readonly #subscriptions = new Set<ChangeSubscription>()
  readonly #announcer: ChangeAnnouncer
  readonly #lookups: WriterLookups
  readonly #pruner: FeedPruner
  #closed = false

  readonly readOnly: boolean
  #damaged: DamagedLog[] = []

  readonly #attachmentMaxBytes: number

  constructor(
    pool: pg.Pool,
    owned: boolean,
    clock: () => number,
    maxLeases: number,
    readOnly: boolean,
    feedLimit: number,
    attachmentMaxBytes: number,
  ) {
    this.#attachmentMaxBytes = attachmentMaxBytes
    this.pool = pool
    this.readOnly = readOnly
    this.#owned = owned
    this.#clock = clock
    // A lease given back takes what this writer knew of the session with it.
    this.#writer = new WriterConnection(pool, maxLeases, (id) => this.#states.delete(id))
    this.#reader = new LogReader(pool, this.#metrics)
    this.#announcer = new ChangeAnnouncer(pool)
    this.#pruner = new FeedPruner(pool, feedLimit, () => this.#metrics.feedPrunes++)
    this.#lookups = new WriterLookups(async (locks) => {
      this.#metrics.lockTableReads++
      const { rows } = await this.#reader.query<{ lock: string; name: string | null }>(
        WRITERS_OF,
        [locks],
        `finding who writes ${locks.length === 1 ? 'a session' : `${locks.length} sessions`} (the server's lock table)`,
        'dsh_writers_of',
      )
      return new Map(rows.map((row) => [row.lock, row.name]))
    })
  }

  get metrics(): Readonly<PostgresPersistenceMetrics> {
    return this.#metrics
  }

  // ------------------------------------------------------------------ writes

  async append(target: AppendTarget, items: readonly AppendedEvent[]): Promise<AppendResult> {
    this.#assertWritable()
    // A batch row holds event lines: runs are expanded, then checked as any events are.
    const events = expandEventRuns(target.header.id, items)
    let state = this.#states.get(target.header.id)
    const id = state?.stored ?? storedId(target.header.id)
    if (state === undefined || !this.#writer.holds(id)) {
      state = await this.#writerState(id)
      if (state === undefined) return this.#create(id, target, events)
    }
    checkAppend(target, events, state)
    if (events.length === 0) return { revision: revisionOf(state.sid, state.nextSeq), nextSeq: SessionLogOffset(state.nextSeq) }
    return this.#commit(id, state, events)
  }

  /** Takes the lease, then reads what this writer needs to know of a stored session (undefined: not materialized). */
  async #writerState(id: StoredId): Promise<WriterState | undefined> {
    this.#states.delete(id.id)
    let rows: (SessionRow & { part: string })[]
    try {
      ;({ rows } = await this.#writer.run<SessionRow & { part: string }>(
        id,
        `SELECT ${SESSION_COLUMNS}, tableoid::regclass::text AS part FROM dsh_sessions WHERE id_key = $1`,
        [id.key],
      ))
    } catch (error) {
      throw ioError(`reading session '${id.id}' before a write`, error)
    }
    const row = rows[0]
    if (row === undefined) return undefined
    this.#reader.opened()
    const header = this.#reader.parseHeader(id.id, row.header)
    const state: WriterState = {
      sid: row.sid,
      header,
      inheritedEventCount: SessionLogOffset(row.inherited),
      nextSeq: row.next_seq,
      stored: id,
      partition: partitionOf(row.part),
    }
    this.#states.set(id.id, state)
    return state
  }

  /** The first append: header row, first batch and change in one statement. */
  async #create(id: StoredId, target: AppendTarget, events: readonly StoredSessionEvent[]): Promise<AppendResult> {
    checkAppend(target, events, undefined)
    const h = target.header
    const cut = target.inheritedEventCount
    const fork =
      target.forkSource !== undefined && cut > 0
        ? await forkReference(this.#reader, this.#metrics, target.forkSource, cut, events)
        : undefined
    // A fork by reference stores only what follows the cut.
    const own = fork === undefined ? events : events.slice(cut)
    const batch = own.length === 0 ? undefined : encodeBatch(own)
    // A fork's source is another session's row, not a foreign key: the insert
    // locks it (FOR KEY SHARE, which a delete's FOR UPDATE waits for) and
    // happens only while it exists, so a delete never leaves a dangling reference.
    let rows: { sid: string | null; part: string | null; source: boolean }[]
    try {
      ;({ rows } = await this.#writer.run<{ sid: string | null; part: string | null; source: boolean }>(
        id,
        `WITH src AS (
           SELECT sid FROM dsh_sessions WHERE $9::bigint IS NOT NULL AND id_key = $17 AND sid = $9 FOR KEY SHARE),
         s AS (
           INSERT INTO dsh_sessions (id_key, id, header, created_at, parent_key, origin, cwd_key, inherited, fork_key, fork_sid, fork_checksum, next_seq)
           SELECT $1::bytea, $2::bytea, $3::text, $4::bigint, $5::bytea, $6::text, $7::bytea, $8::integer, $17::bytea, $9::bigint, $10::integer, $11::integer
           WHERE $9::bigint IS NULL OR EXISTS (SELECT 1 FROM src)
           ON CONFLICT (id_key) DO NOTHING
           RETURNING sid, tableoid::regclass::text AS part),
         b AS (
           INSERT INTO dsh_batches (id_key, sid, first_seq, count, plain_length, checksum, body)
           SELECT $1, sid, $12, $13, $14, $15, $16 FROM s WHERE $13::integer > 0),
         c AS (INSERT INTO dsh_changes (id_key, id) SELECT $1, $2 FROM s)
         SELECT (SELECT sid FROM s) AS sid, (SELECT part FROM s) AS part, ($9::bigint IS NULL OR EXISTS (SELECT 1 FROM src)) AS source`,
        [
          id.key,
          id.bytes,
          JSON.stringify(h),
          h.createdAt,
          h.parentSession === undefined ? null : keyOf(h.parentSession),
          h.origin ?? null,
          h.cwd === undefined ? null : keyOf(h.cwd),
          cut,
          fork?.sid ?? null,
          fork?.checksum ?? null,
          events.length,
          batch?.firstSeq ?? 0,
          batch?.count ?? 0,
          batch?.plainLength ?? 0,
          batch?.checksum ?? 0,
          batch?.body ?? Buffer.alloc(0),
          fork?.key ?? null,
        ],
      ))
    } catch (error) {
      throw ioError(`materializing session '${id.id}'`, error)
    }
    if (rows[0]?.source === false) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `The fork source '${String(target.forkSource)}' was deleted while the fork '${id.id}' was being made; fork from a session that exists.`,
        { details: { id: id.id, source: String(target.forkSource) } },
      )
    }
    const sid = rows[0]?.sid ?? undefined
    if (sid === undefined) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session '${id.id}' was materialized by another writer at the same time; reload it before appending.`,
        { details: { id: id.id } },
      )
    }
    if (batch !== undefined) this.#metrics.appends++
    this.#announcer.announce()
    this.#pruner.changed()
    this.#states.set(id.id, {
      sid,
      header: h,
      inheritedEventCount: cut,
      nextSeq: events.length,
      stored: id,
      partition: partitionOf(rows[0]?.part),
    })
    return { revision: revisionOf(sid, events.length), nextSeq: SessionLogOffset(events.length) }
  }

  /** The hot path: one statement on the session's partitions moves `next_seq` and inserts the batch, carrying the pool's notice when it is its turn (`announcer.ts`). */
  async #commit(id: StoredId, state: WriterState, events: readonly StoredSessionEvent[]): Promise<AppendResult> {
    const batch = encodeBatch(events)
    let carried = false
    let inserted: number | null
    try {
      ;({ rowCount: inserted } = await this.#writer.runChosen(id, () => {
        carried = this.#announcer.carry()
        const statement = appendStatement(state.partition, carried)
        return {
          name: statement.name,
          text: statement.text,
          values: [state.sid, batch.firstSeq, batch.count, batch.plainLength, batch.checksum, batch.body, id.key],
        }
      }))
    } catch (error) {
      if (carried) this.#announcer.carried(false)
      // In doubt (the connection died around the commit): forget what we knew;
      // the next append re-reads the stored offset under the lease.
      this.#states.delete(id.id)
      throw ioError(`appending to session '${id.id}'`, error)
    }
    if (carried) this.#announcer.carried(inserted === 1)
    if (inserted !== 1) {
      this.#states.delete(id.id)
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session '${id.id}' no longer ends at seq ${batch.firstSeq} (it was deleted or written elsewhere); reload it.`,
        {
          details: { id: id.id, expectedSeq: batch.firstSeq },
        },
      )
    }
    const nextSeq = batch.firstSeq + batch.count
    this.#states.set(id.id, { ...state, nextSeq })
    this.#metrics.appends++
    if (!carried) this.#announcer.announce()
    return { revision: revisionOf(state.sid, nextSeq), nextSeq: SessionLogOffset(nextSeq) }
  }

  async load(id: SessionId, signal?: AbortSignal): Promise<LoadedSession> {
    this.#assertOpen()
    this.#checkSignal(signal)
    if (!isStorableId(id)) throw notFound(id)
    const stored = storedId(id)
    // The lease first: the repair must continue the log this read saw.
    if (!this.readOnly) await raceAbort(this.#writer.lease(stored), signal, persistenceCancelled)
    const observation = await this.inspect(id, signal)
    const repairs = this.repairs.eventsFor(observation.events, this.#clock())
    if (repairs.length === 0) return Object.freeze({ ...observation, repaired: false })
    this.#assertWritable()
    const result = await this.append({ header: observation.header, inheritedEventCount: observation.inheritedEventCount }, repairs)
    return Object.freeze({
      ...observation,
      events: Object.freeze([...observation.events, ...repairs]),
      revision: result.revision,
      repaired: true,
    })
  }

  async delete(id: SessionId, options: DeleteOptions = {}): Promise<boolean> {
    this.#assertWritable()
    if (!isStorableId(id)) return false
    const stored = storedId(id)
    try {
      const deleted = await deleteSession(this.#writer, this.#reader, stored, options.materializeDependants === true)
      if (deleted) {
        this.#announcer.announce()
        this.#pruner.changed()
      }
      return deleted
    } finally {
      this.#states.delete(id)
    }
  }

  async putAttachment(id: SessionId, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef> {
    this.#assertWritable()
    checkAttachmentSession(id)
    return putAttachment(this.#reader, storedId(id), bytes, options, this.#attachmentMaxBytes)
  }

  // ------------------------------------------------------------------- reads

  async readAttachment(id: SessionId, digest: string, signal?: AbortSignal): Promise<Uint8Array> {
    this.#assertOpen()
    checkAttachmentSession(id)
    const bytes = await raceAbort(readAttachment(this.#reader, storedId(id), digest), signal, persistenceCancelled)
    this.#metrics.bytesRead += bytes.length
    return bytes
  }

  async list(signal?: AbortSignal): Promise<PersistedSessionRecord[]> {
    this.#assertOpen()
    this.#checkSignal(signal)
    const { rows } = await raceAbort(
      this.#reader.query<{ sid: string; header: string; inherited: number; next_seq: number }>(
        'SELECT sid, header, inherited, next_seq FROM dsh_sessions',
        [],
        'listing sessions',
      ),
      signal,
      persistenceCancelled,
    )
    const records: PersistedSessionRecord[] = []
    const damaged: DamagedLog[] = []
    for (const row of rows) {
      this.#metrics.headerReads++
      this.#reader.opened()
      this.#metrics.bytesRead += row.header.length
      let header: SessionHeader
      try {
        header = this.#reader.parseHeader(undefined, row.header)
      } catch (error) {
        // One damaged header never fails the listing of every other session.
        damaged.push({ id: `sid ${row.sid}`, code: 'SESSION_PERSISTENCE_CORRUPT', message: (error as Error).message })
        continue
      }
      records.push(
        Object.freeze({ header, inheritedEventCount: SessionLogOffset(row.inherited), revision: revisionOf(row.sid, row.next_seq) }),
      )
    }
    this.#checkSignal(signal)
    this.#damaged = damaged
    return records
  }

  damagedLogs(): readonly DamagedLog[] {
    return this.#damaged
  }

  async verify(id: SessionId, signal?: AbortSignal): Promise<LogVerification> {
    const before = this.#metrics.bytesRead
    const observation = await this.inspect(id, signal)
    const { rows } = await this.#reader.query<{ source: Buffer | null }>(
      'SELECT f.id AS source FROM dsh_sessions s LEFT JOIN dsh_sessions f ON f.id_key = s.fork_key AND f.sid = s.fork_sid WHERE s.id_key = $1',
      [keyOf(id)],
      `verifying session '${id}'`,
    )
    const source = rows[0]?.source
    return Object.freeze({
      id,
      events: observation.events.length,
      committedBytes: this.#metrics.bytesRead - before,
      tornBytes: 0 as const,
      ...(source === null || source === undefined ? {} : { forkSource: source.toString('utf8') }),
    })
  }

  async stat(id: SessionId, signal?: AbortSignal): Promise<SessionRevision | undefined> {
    this.#assertOpen()
    this.#checkSignal(signal)
    if (!isStorableId(id)) return undefined
    const { rows } = await raceAbort(
      this.#reader.query<{ sid: string; next_seq: number }>(
        'SELECT sid, next_seq FROM dsh_sessions WHERE id_key = $1',
        [keyOf(id)],
        `stat of session '${id}'`,
      ),
      signal,
      persistenceCancelled,
    )
    const row = rows[0]
    return row === undefined ? undefined : revisionOf(row.sid, row.next_seq)
  }

  /**
   * The process holding the session's writer lease, from the server's lock
   * table and the holding connection's name (`writer-identity.ts`); reads no
   * log. Calls made together share one read of the lock table
   * (`writer-lookup.ts`). A lease given back (close, eviction) or dropped with its connection
   * (a dead host) is no holder. An id that cannot be stored has none.
   */
  async writerOf(id: SessionId, signal?: AbortSignal): Promise<SessionWriter | undefined> {
    this.#assertOpen()
    this.#checkSignal(signal)
    if (!isStorableId(id)) return undefined
    const name = await raceAbort(this.#lookups.holder(storedId(id).lock), signal, persistenceCancelled)
    return name === undefined ? undefined : holderNamed(name)
  }

  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionObservation> {
    const suffix = await this.inspectFrom(id, SessionLogOffset(0), signal)
    const { from: _from, ...observation } = suffix
    return Object.freeze(observation)
  }

  async inspectFrom(id: SessionId, from: SessionLogOffset, signal?: AbortSignal): Promise<SessionSuffixObservation> {
    this.#assertOpen()
    this.#checkSignal(signal)
    if (!isStorableId(id)) throw notFound(id)
    return raceAbort(this.#reader.read(id, from), signal, persistenceCancelled)
  }

  async inspectRange(id: SessionId, range: SessionRange, signal?: AbortSignal): Promise<SessionRangeObservation> {
    const checked = checkRange(range)
    this.#assertOpen()
    this.#checkSignal(signal)
    if (!isStorableId(id)) throw notFound(id)
    return raceAbort(this.#reader.readRange(id, checked), signal, persistenceCancelled)
  }

  async changes(since?: SessionChangeCursor, signal?: AbortSignal): Promise<SessionChanges> {
    this.#assertOpen()
    this.#checkSignal(signal)
    const changes = await raceAbort(
      readChanges(this.pool, since).catch((error: unknown) => {
        throw ioError('reading the change feed', error)
      }),
      signal,
      persistenceCancelled,
    )
    if (changes.rescan) this.#metrics.rescans++
    if (changes.rescanReason === 'behind-horizon') this.#metrics.horizonRescans++
    return changes
  }

  feedIdle(): Promise<void> {
    return this.#pruner.idle()
  }

  async subscribe(listener: () => void): Promise<ChangeSubscription> {
    this.#assertOpen()
    const subscription = await subscribeChanges(this.pool, listener)
    this.#subscriptions.add(subscription)
    return {
      close: async () => {
        this.#subscriptions.delete(subscription)
        await subscription.close()
      },
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#announcer.close()
    await this.#pruner.close()
    await this.#writer.close()
    this.#states.clear()
    await Promise.allSettled([...this.#subscriptions].map((s) => s.close()))
    this.#subscriptions.clear()
    if (this.#owned) await this.pool.end().catch(() => {})
  }

  // --------------------------------------------------------------- helpers

  #assertOpen(): void {
    if (this.#closed)
      throw persistenceError(
        'SESSION_PERSISTENCE_CLOSED',
        'This PostgreSQL persistence instance is closed; open a new one over the same database.',
      )
  }

  #assertWritable(): void {
    this.#assertOpen()
    if (this.readOnly)
      throw persistenceError(
        'SESSION_PERSISTENCE_READ_ONLY',
        'This PostgreSQL persistence was opened read-only; open it without readOnly to write.',
      )
  }

  #checkSignal(signal: AbortSignal | undefined): void {
    if (signal?.aborted) throw persistenceCancelled()
  }
}
