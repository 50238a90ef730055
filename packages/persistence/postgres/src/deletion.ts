import { persistenceError } from '@dsh/session-persistence/backend'
import { deleteAttachments, inheritAttachments } from './attachments.js'
import { encodeBatch } from './batch-codec.js'
import { ioError } from './errors.js'
import type { StoredId } from './ids.js'
import type { LogReader, SessionRow } from './log-reader.js'
import type { WriterConnection, WriterQuery } from './writer.js'

/**
 * Deletes the session row and its batches and records the change, in one
 * statement. A batch row has no foreign key to its session (`schema.ts`):
 * the statement removes them itself. It runs after the transaction has
 * locked the row (`FOR UPDATE`), and every batch is inserted by a statement
 * that writes that row, so its snapshot holds every batch the session has.
 */
const DELETE_STATEMENT = `WITH s AS (DELETE FROM dsh_sessions WHERE id_key = $1 RETURNING sid),
   b AS (DELETE FROM dsh_batches WHERE id_key = $1 AND sid IN (SELECT sid FROM s)),
   c AS (INSERT INTO dsh_changes (id_key, id) SELECT $1, $2 FROM s)
   SELECT sid FROM s`

/**
 * Gives a dependant its inherited prefix as its own first batch, drops its
 * reference and records the change, in one statement: the batch is taken
 * from the row the statement updates (and so locks), so a dependant deleted
 * meanwhile gets no batch. Returns the sid when the dependant still exists.
 */
const MATERIALIZE_STATEMENT = `WITH d AS (
     UPDATE dsh_sessions SET fork_key = NULL, fork_sid = NULL, fork_checksum = NULL WHERE id_key = $1 AND sid = $2 RETURNING id_key, sid, id),
   b AS (
     INSERT INTO dsh_batches (id_key, sid, first_seq, count, plain_length, checksum, body) SELECT id_key, sid, 0, $3, $4, $5, $6 FROM d),
   c AS (INSERT INTO dsh_changes (id_key, id) SELECT id_key, id FROM d)
   SELECT sid FROM d`

/**
 * Deletes one session under its lease; resolves whether it existed. A
 * source that forks reference is refused with
 * `SESSION_PERSISTENCE_REFERENCED` unless `materializeDependants`, which
 * first gives every direct dependant its inherited prefix as its own first
 * batch.
 *
 * A fork's reference (`fork_key`, `fork_sid`) crosses sessions, so it is no
 * foreign key (a key that includes the distribution key cannot name another
 * session's partition). The delete's transaction locks the row it deletes
 * (`FOR UPDATE`; a fork being made holds `FOR KEY SHARE` on its source until
 * it commits) and then looks for a fork naming it: none, or the refusal.
 */
export async function deleteSession(
  writer: WriterConnection,
  reader: LogReader,
  stored: StoredId,
  materializeDependants: boolean,
): Promise<boolean> {
  await writer.lease(stored)
  const dependants = materializeDependants ? await dependantsOf(reader, stored) : []
  let rows: { sid: string }[]
  try {
    rows = await deleteChecked(writer, reader, stored, dependants)
  } catch (error) {
    // Typed refusals pass through as they are.
    throw ioError(`deleting session '${stored.id}'`, error)
  }
  await writer.release(stored)
  return rows.length > 0
}

/** The forks that reference `source` directly (a fork's reference always names the log holding its cut). */
async function dependantsOf(reader: LogReader, source: StoredId): Promise<(SessionRow & { id: Buffer })[]> {
  const { rows } = await reader.query<SessionRow & { id: Buffer }>(
    `SELECT d.id_key, d.sid, d.header, d.inherited, d.next_seq, d.fork_key, d.fork_sid, d.fork_checksum, d.id
     FROM dsh_sessions d JOIN dsh_sessions s ON d.fork_key = s.id_key AND d.fork_sid = s.sid WHERE s.id_key = $1`,
    [source.key],
    `finding the forks of '${source.id}'`,
  )
  return rows
}

/**
 * In one transaction on the writer connection: locks the source row, gives
 * each of `dependants` its inherited prefix as its own first batch and drops
 * its reference, refuses if any fork still names the source, then deletes it.
 * The dependants' events and revisions do not change.
 */
async function deleteChecked(
  writer: WriterConnection,
  reader: LogReader,
  source: StoredId,
  dependants: readonly SessionRow[],
): Promise<{ sid: string }[]> {
  const prefixes = await Promise.all(dependants.map(async (d) => ({ d, events: await reader.events(source.id, d, 0, d.inherited) })))
  return writer.transaction(source, async (query) => {
    const locked = await query<{ sid: string }>('SELECT sid FROM dsh_sessions WHERE id_key = $1 FOR UPDATE', [source.key])
    const sid = locked.rows[0]?.sid
    if (sid === undefined) return []
    for (const { d, events } of prefixes) {
      if (events.length !== d.inherited)
        throw persistenceError('SESSION_PERSISTENCE_CORRUPT', `The inherited prefix of a fork of '${source.id}' could not be read whole.`, {
          details: { id: source.id },
        })
      const batch = encodeBatch(events)
      const materialized = await query(MATERIALIZE_STATEMENT, [d.id_key, d.sid, batch.count, batch.plainLength, batch.checksum, batch.body])
      // The attachments it read through the reference become its own rows.
      if (materialized.rows.length > 0) await inheritAttachments(query, d.id_key, source.key)
    }
    await refuseIfReferenced(query, source, sid)
    await deleteAttachments(query, source.key)
    const { rows } = await query<{ sid: string }>(DELETE_STATEMENT, [source.key, source.bytes])
    return rows
  })
}

/** `SESSION_PERSISTENCE_REFERENCED` when a fork names the (locked) source row. */
async function refuseIfReferenced(query: WriterQuery, source: StoredId, sid: string): Promise<void> {
  const { rows } = await query('SELECT 1 FROM dsh_sessions WHERE fork_sid = $1 AND fork_key = $2 LIMIT 1', [sid, source.key])
  if (rows.length === 0) return
  throw persistenceError(
    'SESSION_PERSISTENCE_REFERENCED',
    `Session '${source.id}' is the source of forks that reference its prefix; delete them first, or delete with { materializeDependants: true } to give them their own copy.`,
    { details: { id: source.id } },
  )
}
