import { CHANGES_CHANNEL } from './schema.js'

/**
 * The append statement of one session: move `next_seq`, insert the batch,
 * in one statement, prepared once per writer connection and partition.
 *
 * It names the session's partitions (`dsh_sessions_p<n>`, `dsh_batches_p<n>`)
 * rather than the partitioned parents. A prepared statement on a parent is
 * either planned at every execution (custom plans: the planner prunes the
 * partitions, which costs more than the append's own work) or planned once
 * generically, and then every execution locks every partition: beyond the
 * backend's 16 fast-path lock slots, so concurrent writers queue on the
 * server's lock manager. On one partition a generic plan locks only the
 * relations the append writes, and is planned once.
 *
 * A session's rows have the same partition number in every per-session table
 * (same key, same modulus: `layout.ts`); the number is read from the session
 * row's `tableoid` when the writer learns the session. The server still
 * checks each row against its partition's bounds, so a wrong number is an
 * error, never a misplaced row.
 */
export interface AppendStatement {
  readonly name: string
  readonly text: string
}

/** The partition number of a `dsh_sessions` partition named by `tableoid::regclass` (undefined: not `dsh_sessions_p<n>`). */
export function partitionOf(relation: string | null | undefined): number | undefined {
  const match = /^dsh_sessions_p(\d{1,4})$/.exec(relation ?? '')
  return match === null ? undefined : Number(match[1])
}

const cache = new Map<string, AppendStatement>()

/**
 * The statement for a session in `partition` (undefined: through the parents).
 * Parameters: $1 sid, $2 first seq (the stored `next_seq`), $3 count,
 * $4 plain length, $5 checksum, $6 body, $7 id_key. Its command is the
 * batch's INSERT, fed by the session row's UPDATE: it inserts one row
 * (`rowCount` 1) when the session still ends at $2, none otherwise. It
 * returns no rows, so an append reads back only the command tag (no row
 * description, no data row to parse).
 *
 * With `notify`, the statement also NOTIFYs the change channel (the pool's
 * notice, `announcer.ts`), delivered with its commit; the notice is certain
 * to be sent only when the row was inserted (`rowCount` 1): the batch's rows
 * are joined to the notice's.
 */
export function appendStatement(partition: number | undefined, notify = false): AppendStatement {
  const key = `${notify ? 'n' : ''}${partition ?? ''}`
  const known = cache.get(key)
  if (known !== undefined) return known
  const suffix = partition === undefined ? '' : `_p${partition}`
  const statement: AppendStatement = {
    name: `dsh_append${notify ? '_notify' : ''}${suffix}`,
    text: `WITH s AS (
       UPDATE dsh_sessions${suffix} SET next_seq = next_seq + $3 WHERE id_key = $7 AND sid = $1 AND next_seq = $2 RETURNING sid)${
         notify ? `,\n     n AS (SELECT pg_notify('${CHANGES_CHANNEL}', ''))` : ''
       }
     INSERT INTO dsh_batches${suffix} (id_key, sid, first_seq, count, plain_length, checksum, body)
     SELECT $7, sid, $2, $3, $4, $5, $6 FROM s${notify ? ', n' : ''}`,
  }
  cache.set(key, statement)
  return statement
}
