import { parseSessionHeader, type SessionHeader, type SessionId, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import type { PersistenceMetrics, SessionRangeObservation, SessionRevision, SessionSuffixObservation } from '@dsh/session-persistence'
import { type CheckedRange, persistenceError } from '@dsh/session-persistence/backend'
import type pg from 'pg'
import { type BatchRow, decodeBatch } from './batch-codec.js'
import { ioError } from './errors.js'
import { keyOf } from './ids.js'

/** A session row as reads and writes select it. */
export interface SessionRow {
  /** The distribution key (the id's SHA-256): every statement on a session's rows names it, so it touches one partition. */
  id_key: Buffer
  sid: string
  header: string
  inherited: number
  next_seq: number
  /** The fork source's `id_key` and `sid` (both or neither). */
  fork_key: Buffer | null
  fork_sid: string | null
  fork_checksum: number | null
}

export const SESSION_COLUMNS = 'id_key, sid, header, inherited, next_seq, fork_key, fork_sid, fork_checksum'

/**
 * Reads of stored logs, shared by every read path of an instance (and by the
 * writes that must read: a fork's reference, materializing dependants). It
 * counts what it reads in the instance's metrics.
 *
 * Invariant: a read never needs a transaction. A session row is read first
 * (or with its batches, in one statement); committed batches never change
 * and `next_seq` only grows, so batches beyond the row's `next_seq` are
 * simply not part of the observation.
 */
export class LogReader {
  readonly pool: pg.Pool
  readonly metrics: PersistenceMetrics

  constructor(pool: pg.Pool, metrics: PersistenceMetrics) {
    this.pool = pool
    this.metrics = metrics
  }

  /** One statement on a pooled connection; a `name` prepares it once per connection (parsed and planned once). */
  async query<R extends pg.QueryResultRow>(text: string, values: unknown[], what: string, name?: string): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(name === undefined ? { text, values } : { name, text, values })
    } catch (error) {
      throw ioError(what, error)
    }
  }

  parseHeader(id: string | undefined, text: string): SessionHeader {
    try {
      return parseSessionHeader(JSON.parse(text))
    } catch (error) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CORRUPT',
        `The stored header${id === undefined ? '' : ` of session '${id}'`} is not a valid session header.`,
        { cause: error, ...(id === undefined ? {} : { details: { id } }) },
      )
    }
  }

  opened(): void {
    this.metrics.logOpens = (this.metrics.logOpens ?? 0) + 1
  }

  /**
   * A body read without a transaction: the session row first, then batches
   * bounded by its `next_seq` (committed batches never change, so anything
   * newer is simply not part of this observation). Batches missing below
   * that bound mean the session was deleted meanwhile (NOT_FOUND) or the
   * log is damaged (CORRUPT).
   */
  async read(id: SessionId, from: number): Promise<SessionSuffixObservation> {
    const { total: _total, ...suffix } = await this.readRange(id, { from, to: undefined, limit: undefined })
    return Object.freeze(suffix)
  }

  /**
   * Events of a range (see `SessionPersistence.inspectRange`) in one
   * statement (one snapshot, one round trip): the session row and only the
   * batches that hold the range, bounded by the row's `next_seq`. The range's
   * bounds are resolved against `next_seq` in the statement; the first batch
   * is found by the primary key (the last batch starting at or before the
   * range), so the batches before it are neither read nor scanned. A range
   * reaching into a fork's inherited prefix reads it from the source's
   * batches the same way.
   */
  async readRange(id: SessionId, range: CheckedRange): Promise<SessionRangeObservation> {
    const { rows } = await this.query<
      SessionRow & { lo: number; hi: number; first_seq: number | null; count: number; plain_length: number; checksum: number; body: Buffer }
    >(
      `SELECT s.id_key, s.sid, s.header, s.inherited, s.next_seq, s.fork_key, s.fork_sid, s.fork_checksum, r.lo, e.hi,
              b.first_seq, b.count, b.plain_length, b.checksum, b.body
       FROM dsh_sessions s
       CROSS JOIN LATERAL (SELECT LEAST(s.next_seq, COALESCE($3::integer, s.next_seq)) AS hi) e
       CROSS JOIN LATERAL (SELECT LEAST(e.hi, GREATEST($2::integer, e.hi - COALESCE($4::integer, e.hi))) AS lo) r
       LEFT JOIN dsh_batches b ON b.id_key = $1 AND b.sid = s.sid AND r.lo < e.hi AND b.first_seq < e.hi
         AND b.first_seq >= COALESCE(
           (SELECT f.first_seq FROM dsh_batches f WHERE f.id_key = $1 AND f.sid = s.sid AND f.first_seq <= r.lo ORDER BY f.first_seq DESC LIMIT 1), 0)
       WHERE s.id_key = $1
       ORDER BY b.first_seq`,
      [keyOf(id), range.from, range.to ?? null, range.limit ?? null],
      `reading session '${id}'`,
    )
    const row = rows[0]
    if (row === undefined) throw notFound(id)
    this.opened()
    this.metrics.bodyReads++
    this.metrics.headerReads++
    this.metrics.bytesRead += row.header.length
    const header = this.parseHeader(id, row.header)
    const { lo, hi } = row
    const events: StoredSessionEvent[] = []
    // A fork's inherited prefix lives in its source's log.
    if (row.fork_sid !== null && lo < row.inherited) events.push(...(await this.sourceEvents(id, row, lo, Math.min(hi, row.inherited))))
    for (const batch of rows) {
      if (batch.first_seq === null || batch.first_seq + batch.count <= lo) continue
      this.metrics.bytesRead += batch.body.length
      for (const event of decodeBatch(id, batch as BatchRow)) if (event.seq >= lo && event.seq < hi) events.push(event)
    }
    if (events.length !== hi - lo) {
      if (
        (await this.query('SELECT 1 FROM dsh_sessions WHERE id_key = $1 AND sid = $2', [row.id_key, row.sid], `reading session '${id}'`))
          .rows.length === 0
      )
        throw notFound(id)
      throw persistenceError(
        'SESSION_PERSISTENCE_CORRUPT',
        `Session '${id}' records ${row.next_seq} events but its batches hold ${events.length} of events ${lo}-${hi - 1}; the stored log is damaged.`,
        { details: { id } },
      )
    }
    return Object.freeze({
      header,
      inheritedEventCount: SessionLogOffset(row.inherited),
      revision: revisionOf(row.sid, row.next_seq),
      from: SessionLogOffset(lo),
      events: Object.freeze(events),
      total: row.next_seq,
    })
  }

  /** Events `[lo, hi)` of the log `row`, joining a referenced fork source's prefix. */
  async events(
    id: SessionId,
    row: SessionRow,
    lo: number,
    hi: number,
    digest?: { cut: number; checksum: number | null },
  ): Promise<StoredSessionEvent[]> {
    const out: StoredSessionEvent[] = []
    if (row.fork_sid !== null && lo < row.inherited) {
      out.push(...(await this.sourceEvents(id, row, lo, Math.min(hi, row.inherited))))
      lo = row.inherited
    }
    if (lo >= hi) return out
    const { rows } = await this.query<BatchRow>(
      'SELECT first_seq, count, plain_length, checksum, body FROM dsh_batches WHERE id_key = $4 AND sid = $1 AND first_seq < $3 AND first_seq + count > $2 ORDER BY first_seq',
      [row.sid, lo, hi, row.id_key],
      `reading the batches of session '${id}'`,
    )
    for (const batch of rows) {
      this.metrics.bytesRead += batch.body.length
      // The fork's digest: the source batch holding the cut's last event must be the one the fork was made from.
      if (
        digest !== undefined &&
        batch.first_seq <= digest.cut - 1 &&
        digest.cut - 1 < batch.first_seq + batch.count &&
        batch.checksum !== digest.checksum
      ) {
        throw persistenceError(
          'SESSION_PERSISTENCE_CORRUPT',
          `The fork source of session '${id}' no longer holds the prefix the fork was made from (checksum mismatch at event ${digest.cut - 1}).`,
          { details: { id } },
        )
      }
      for (const event of decodeBatch(id, batch)) if (event.seq >= lo && event.seq < hi) out.push(event)
    }
    return out
  }

  /** Events `[lo, hi)` below a fork's cut, from the log the fork references, checked against the fork's digest. */
  async sourceEvents(id: SessionId, fork: SessionRow, lo: number, hi: number): Promise<StoredSessionEvent[]> {
    const source = (
      await this.query<SessionRow>(
        `SELECT ${SESSION_COLUMNS} FROM dsh_sessions WHERE id_key = $1 AND sid = $2`,
        [fork.fork_key, fork.fork_sid],
        `reading the fork source of '${id}'`,
      )
    ).rows[0]
    if (source === undefined)
      throw persistenceError('SESSION_PERSISTENCE_CORRUPT', `The fork source of session '${id}' is gone.`, { details: { id } })
    return this.events(id, source, lo, hi, { cut: fork.inherited, checksum: fork.fork_checksum })
  }
}

/** The revision of a stored log: its lifecycle's `sid` (never reused) and its `next_seq`. Query backends reading the tables directly use it. */
export function revisionOf(sid: string, nextSeq: number): SessionRevision {
  return `pg${sid}.${nextSeq}`
}

export function notFound(id: string) {
  return persistenceError('SESSION_PERSISTENCE_NOT_FOUND', `Session '${id}' is not persisted.`, { details: { id } })
}
