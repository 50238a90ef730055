import { persistenceError } from '@dsh/session-persistence/backend'
import { encodeBatch } from './batch-codec.js'
import { ioError } from './errors.js'
import type { StoredId } from './ids.js'
import type { LogReader, SessionRow } from './log-reader.js'
import type { WriterConnection } from './writer.js'

/** Deletes the session row (its batches cascade) and records the change, in one statement. */
const DELETE_STATEMENT = `WITH s AS (DELETE FROM dsh_sessions WHERE id_key = $1 RETURNING sid),
   c AS (INSERT INTO dsh_changes (id) SELECT $2 FROM s)
   SELECT sid FROM s`

/**
 * Deletes one session under its lease; resolves whether it existed. A
 * source that forks reference is refused with
 * `SESSION_PERSISTENCE_REFERENCED` (the `fork_sid` foreign key restricts)
 * unless `materializeDependants`, which first gives every direct dependant
 * its inherited prefix as its own first batch.
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
    if (dependants.length === 0) {
      ;({ rows } = await writer.run<{ sid: string }>(stored, DELETE_STATEMENT, [stored.key, stored.bytes]))
    } else {
      rows = await deleteMaterializing(writer, reader, stored, dependants)
    }
  } catch (error) {
    if ((error as { code?: string }).code === '23503') {
      throw persistenceError(
        'SESSION_PERSISTENCE_REFERENCED',
        `Session '${stored.id}' is the source of forks that reference its prefix; delete them first, or delete with { materializeDependants: true } to give them their own copy.`,
        { details: { id: stored.id } },
      )
    }
    throw ioError(`deleting session '${stored.id}'`, error)
  }
  await writer.release(stored)
  return rows.length > 0
}

/** The forks that reference `source` directly (a fork's reference always names the log holding its cut). */
async function dependantsOf(reader: LogReader, source: StoredId): Promise<SessionRow[]> {
  const { rows } = await reader.query<SessionRow & { id: Buffer }>(
    `SELECT d.sid, d.header, d.inherited, d.next_seq, d.fork_sid, d.fork_checksum, d.id FROM dsh_sessions d JOIN dsh_sessions s ON d.fork_sid = s.sid WHERE s.id_key = $1`,
    [source.key],
    `finding the forks of '${source.id}'`,
  )
  return rows
}

/**
 * Gives each dependant its inherited prefix as its own first batch and
 * drops its reference, then deletes the source, in one transaction on the
 * writer connection. The dependants' events and revisions do not change.
 */
async function deleteMaterializing(
  writer: WriterConnection,
  reader: LogReader,
  source: StoredId,
  dependants: readonly SessionRow[],
): Promise<{ sid: string }[]> {
  const prefixes = await Promise.all(dependants.map(async (d) => ({ d, events: await reader.events(source.id, d, 0, d.inherited) })))
  return writer.transaction(source, async (query) => {
    for (const { d, events } of prefixes) {
      if (events.length !== d.inherited)
        throw persistenceError('SESSION_PERSISTENCE_CORRUPT', `The inherited prefix of a fork of '${source.id}' could not be read whole.`, {
          details: { id: source.id },
        })
      const batch = encodeBatch(events)
      await query('INSERT INTO dsh_batches (sid, first_seq, count, plain_length, checksum, body) VALUES ($1, $2, $3, $4, $5, $6)', [
        d.sid,
        0,
        batch.count,
        batch.plainLength,
        batch.checksum,
        batch.body,
      ])
      await query('UPDATE dsh_sessions SET fork_sid = NULL, fork_checksum = NULL WHERE sid = $1', [d.sid])
      await query('INSERT INTO dsh_changes (id) SELECT id FROM dsh_sessions WHERE sid = $1', [d.sid])
    }
    const { rows } = await query<{ sid: string }>(DELETE_STATEMENT, [source.key, source.bytes])
    return rows
  })
}
