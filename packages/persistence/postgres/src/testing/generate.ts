import { parseSessionHeader, SESSION_HEADER_VERSION, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import type pg from 'pg'
import { encodeBatch } from '../batch-codec.js'

/** What `generateHeaderSessions` writes. */
export interface GenerateSessionsOptions {
  /** How many sessions. */
  readonly count: number
  /** Ids are `<prefix><n>`, n = 1…count zero-padded to 8 digits (so id order is n order). Default `gen-`. */
  readonly prefix?: string
  /** Events per session, in one batch (user messages `m<seq>`); default 0: header rows only. */
  readonly events?: number
  /**
   * Each root is followed by this many children (`parentSession` = the
   * root's id, seeded, delegation depth 1); default 0: every session is a root.
   */
  readonly childrenPerRoot?: number
  /** `createdAt` of session n is `createdFrom + n` (default 1,700,000,000,000). */
  readonly createdFrom?: number
}

const PLACEHOLDER_ID = '\u0001id\u0001'
const PLACEHOLDER_PARENT = '\u0001parent\u0001'
const PLACEHOLDER_CREATED = 987654321

/**
 * Writes `count` sessions server-side (`generate_series`, one statement per
 * table) in exactly the row layout the backend writes: the header as the
 * backend serializes it, `id_key`/`parent_key` as SHA-256 digests, one
 * batch of `events` events (the same zstd frame for every session: a batch
 * line holds no session id) and the creation's `dsh_changes` row. Works on
 * the schema the database holds: the partitioned one, or the unpartitioned
 * schema 3 (for migration tests). For benchmarks and tests that need many
 * stored sessions without the cost of appending them one by one; the
 * sessions read, list, fork and delete as any the backend wrote.
 */
export async function generateHeaderSessions(pool: pg.Pool, options: GenerateSessionsOptions): Promise<void> {
  const prefix = options.prefix ?? 'gen-'
  const events = options.events ?? 0
  const group = (options.childrenPerRoot ?? 0) + 1
  const from = options.createdFrom ?? 1_700_000_000_000
  // The header text exactly as JSON.stringify writes it, with SQL for the per-session fields.
  const template = (parent: boolean) =>
    JSON.stringify(
      parseSessionHeader({
        version: SESSION_HEADER_VERSION,
        id: PLACEHOLDER_ID,
        createdAt: PLACEHOLDER_CREATED,
        isSeeded: parent,
        delegationDepth: parent ? 1 : 0,
        ...(parent ? { parentSession: PLACEHOLDER_PARENT } : {}),
      }),
    )
  const sqlOf = (text: string) =>
    `'${text.replaceAll("'", "''")}'`
      .replace(JSON.stringify(PLACEHOLDER_ID), `' || to_json(g.id)::text || '`)
      .replace(JSON.stringify(PLACEHOLDER_PARENT), `' || to_json(g.parent)::text || '`)
      .replace(String(PLACEHOLDER_CREATED), `' || g.created_at || '`)
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const partitioned = (
      await client.query(
        `SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'dsh_batches' AND column_name = 'id_key'`,
      )
    ).rows.length
    await client.query(
      `CREATE TEMPORARY TABLE dsh_generated ON COMMIT DROP AS
       SELECT n, ($1 || lpad(n::text, 8, '0')) AS id,
              CASE WHEN (n - 1) % $2 = 0 THEN NULL ELSE $1 || lpad((n - (n - 1) % $2)::text, 8, '0') END AS parent,
              $3::bigint + n AS created_at
       FROM generate_series(1, $4::integer) n`,
      [prefix, group, from, options.count],
    )
    await client.query(
      `INSERT INTO dsh_sessions (id_key, id, header, created_at, parent_key, origin, cwd_key, inherited, next_seq)
       SELECT sha256(convert_to(g.id, 'UTF8')), convert_to(g.id, 'UTF8'),
              CASE WHEN g.parent IS NULL THEN ${sqlOf(template(false))} ELSE ${sqlOf(template(true))} END,
              g.created_at, sha256(convert_to(g.parent, 'UTF8')), NULL, NULL, 0, $1
       FROM dsh_generated g ORDER BY g.n`,
      [events],
    )
    if (events > 0) {
      const batch = encodeBatch(
        Array.from(
          { length: events },
          (_, seq): StoredSessionEvent => ({ type: 'user/message', seq: SessionSeq(seq), time: seq, data: { text: `m${seq}` } }),
        ),
      )
      await client.query(
        `INSERT INTO dsh_batches (${partitioned ? 'id_key, ' : ''}sid, first_seq, count, plain_length, checksum, body)
         SELECT ${partitioned ? 's.id_key, ' : ''}s.sid, 0, $1, $2, $3, $4
         FROM dsh_generated g JOIN dsh_sessions s ON s.id_key = sha256(convert_to(g.id, 'UTF8'))`,
        [batch.count, batch.plainLength, batch.checksum, batch.body],
      )
    }
    await client.query(
      `INSERT INTO dsh_changes (${partitioned ? 'id_key, ' : ''}id)
       SELECT ${partitioned ? "sha256(convert_to(g.id, 'UTF8')), " : ''}convert_to(g.id, 'UTF8') FROM dsh_generated g ORDER BY g.n`,
    )
    await client.query('COMMIT')
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.release()
  }
}
