import type { SessionId, StoredSessionEvent } from '@dsh/session'
import type { PersistenceMetrics } from '@dsh/session-persistence'
import { persistenceError } from '@dsh/session-persistence/backend'
import { type BatchRow, decodeBatch } from './batch-codec.js'
import { isStorableId, storedId } from './ids.js'
import { type LogReader, SESSION_COLUMNS, type SessionRow } from './log-reader.js'

/** Where a fork by reference points: the log holding its cut, and that log's batch digest at the cut. */
export interface ForkReference {
  readonly key: Buffer
  readonly sid: string
  readonly checksum: number
}

/**
 * Where a fork's inherited prefix `[0, cut)` lives: the source log (or,
 * when the cut falls inside the source's own inherited prefix, the log
 * that source references) and the checksum of the batch holding event
 * `cut - 1`. No event of the prefix is read or copied.
 */
export async function forkReference(
  reader: LogReader,
  metrics: PersistenceMetrics,
  source: SessionId,
  cut: number,
  seed: readonly StoredSessionEvent[],
): Promise<ForkReference> {
  if (!isStorableId(source))
    throw persistenceError('SESSION_PERSISTENCE_CONFLICT', 'The fork source id cannot be stored.', { details: { source } })
  let row = (
    await reader.query<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM dsh_sessions WHERE id_key = $1`,
      [storedId(source).key],
      'reading a fork source',
    )
  ).rows[0]
  if (row === undefined || row.next_seq < cut) {
    throw persistenceError(
      'SESSION_PERSISTENCE_CONFLICT',
      `The fork source '${source}' holds ${row?.next_seq ?? 0} committed events; a cut at ${cut} needs at least that many. Persist the source first.`,
      {
        details: { source, cut },
      },
    )
  }
  while (row.fork_sid !== null && cut <= row.inherited) {
    row = (
      await reader.query<SessionRow>(
        `SELECT ${SESSION_COLUMNS} FROM dsh_sessions WHERE id_key = $1 AND sid = $2`,
        [row.fork_key, row.fork_sid],
        'reading a fork source',
      )
    ).rows[0]
    if (row === undefined)
      throw persistenceError('SESSION_PERSISTENCE_CORRUPT', `The fork source chain of '${source}' is broken.`, { details: { source } })
  }
  const { rows } = await reader.query<BatchRow>(
    'SELECT first_seq, count, plain_length, checksum, body FROM dsh_batches WHERE id_key = $3 AND sid = $1 AND first_seq <= $2 ORDER BY first_seq DESC LIMIT 1',
    [row.sid, cut - 1, row.id_key],
    'reading a fork source',
  )
  const holding = rows[0]
  if (holding === undefined)
    throw persistenceError('SESSION_PERSISTENCE_CORRUPT', `The fork source '${source}' has no batch holding event ${cut - 1}.`, {
      details: { source },
    })
  // The one batch holding the cut is read (never the whole prefix): the
  // seed's events there must be the source's, or the reference would
  // answer with events the fork never had.
  metrics.bytesRead += holding.body.length
  for (const event of decodeBatch(source, holding)) {
    if (event.seq >= cut) break
    const mine = seed[event.seq]
    if (mine === undefined || !sameEvent(mine, event)) {
      throw persistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `The seed of the fork does not match the committed prefix of '${source}' at event ${event.seq}; fork from what the source committed.`,
        { details: { source, seq: event.seq } },
      )
    }
  }
  return { key: row.id_key, sid: row.sid, checksum: holding.checksum }
}

/** Two events are the same when their stored JSON lines are (the form a batch keeps them in). */
function sameEvent(a: StoredSessionEvent, b: StoredSessionEvent): boolean {
  return (
    JSON.stringify({ type: a.type, seq: a.seq, time: a.time, data: a.data }) ===
    JSON.stringify({ type: b.type, seq: b.seq, time: b.time, data: b.data })
  )
}
