import type { AttachmentRef } from '@dsh/session'
import type { AttachmentPutOptions } from '@dsh/session-persistence'
import { attachmentNotFound, checkAttachment, checkDigest, digestMatches, persistenceError } from '@dsh/session-persistence/backend'
import type { StoredId } from './ids.js'
import { type Layout, partitionsOf } from './layout.js'
import type { LogReader } from './log-reader.js'
import type { WriterQuery } from './writer.js'

/**
 * Attachments in PostgreSQL: one `bytea` row per (session, digest), in the
 * session's partition (hash of `id_key`, as every per-session table). Rows
 * are keyed by the session's `id_key`, not its `sid`: bytes may be stored
 * before the session's first append.
 *
 * Invariants: a fork by reference reads its source's rows through its
 * `fork_key` chain (one recursive statement), never a copy. The source
 * cannot be deleted while a fork names it (`deletion.ts`, checked in the
 * delete's transaction after locking the row); with `materializeDependants`
 * each dependant gets its own rows of the attachments it read through the
 * reference in that same transaction, before the source's rows go with the
 * source. Every read checks the bytes against their digest.
 */
export function attachmentsTable(layout: Layout): string[] {
  return [
    `CREATE TABLE dsh_attachments (
        id_key bytea NOT NULL,
        digest bytea NOT NULL CHECK (length(digest) = 32),
        media_type text NOT NULL,
        size integer NOT NULL CHECK (size >= 0),
        body bytea NOT NULL,
        PRIMARY KEY (id_key, digest)
      ) PARTITION BY HASH (id_key)`,
    ...partitionsOf('dsh_attachments', layout),
    // Images and documents are mostly compressed already: no pglz attempt.
    'ALTER TABLE dsh_attachments ALTER COLUMN body SET STORAGE EXTERNAL',
  ]
}

/** Stores the bytes once per session (`ON CONFLICT DO NOTHING`) and returns their reference. */
export async function putAttachment(
  reader: LogReader,
  stored: StoredId,
  bytes: Uint8Array,
  options: AttachmentPutOptions,
  maxBytes: number,
): Promise<AttachmentRef> {
  const checked = checkAttachment(stored.id, bytes, options, maxBytes)
  await reader.query(
    `INSERT INTO dsh_attachments (id_key, digest, media_type, size, body) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (id_key, digest) DO NOTHING`,
    [stored.key, Buffer.from(checked.digest, 'hex'), checked.ref.mediaType, checked.bytes.length, checked.bytes],
    `storing an attachment of session '${stored.id}'`,
  )
  return Object.freeze(checked.ref)
}

/**
 * The chain of sessions whose attachments `$1` reads: itself, then each fork
 * source in turn, as deep as the forks go (reads of events follow the same
 * chain, unbounded). Each step goes to the row the fork names by key and
 * `sid`, and a fork's source was stored before it (`sid` is an identity), so
 * every step goes to a smaller `sid`: the walk ends, even on rows tampered
 * into a cycle.
 */
const CHAIN = `WITH RECURSIVE chain (key, sid, depth) AS (
    SELECT $1::bytea, NULL::bigint, 0
    UNION ALL
    SELECT s.fork_key, s.fork_sid, c.depth + 1 FROM chain c JOIN dsh_sessions s ON s.id_key = c.key AND (c.sid IS NULL OR s.sid = c.sid)
    WHERE s.fork_key IS NOT NULL AND s.fork_sid < s.sid
  )`

/** The bytes of `digest` from the session's rows, else from its fork source's (up the chain), in one statement. */
export async function readAttachment(reader: LogReader, stored: StoredId, digest: string): Promise<Buffer> {
  checkDigest(stored.id, digest)
  const { rows } = await reader.query<{ body: Buffer }>(
    `${CHAIN} SELECT a.body FROM chain c JOIN dsh_attachments a ON a.id_key = c.key AND a.digest = $2 ORDER BY c.depth LIMIT 1`,
    [stored.key, Buffer.from(digest, 'hex')],
    `reading an attachment of session '${stored.id}'`,
  )
  const body = rows[0]?.body
  if (body === undefined) throw attachmentNotFound(stored.id, digest)
  if (!digestMatches(body, digest)) {
    throw persistenceError(
      'SESSION_PERSISTENCE_CORRUPT',
      `The stored attachment ${digest.slice(0, 12)}… of session '${stored.id}' does not hash to its digest; restore it from a backup or delete the session.`,
      { details: { id: stored.id, digest } },
    )
  }
  return body
}

/**
 * In the delete's transaction: gives fork `dependantKey` its own rows of
 * every attachment it reads through `sourceKey` (the source and its chain),
 * before it stops referencing the source.
 */
export async function inheritAttachments(query: WriterQuery, dependantKey: Buffer, sourceKey: Buffer): Promise<void> {
  await query(
    `${CHAIN} INSERT INTO dsh_attachments (id_key, digest, media_type, size, body)
     SELECT DISTINCT ON (a.digest) $2::bytea, a.digest, a.media_type, a.size, a.body
     FROM chain c JOIN dsh_attachments a ON a.id_key = c.key ORDER BY a.digest, c.depth
     ON CONFLICT (id_key, digest) DO NOTHING`,
    [sourceKey, dependantKey],
  )
}

/** In the delete's transaction, after the refusal check: the deleted session's rows. */
export async function deleteAttachments(query: WriterQuery, key: Buffer): Promise<void> {
  await query('DELETE FROM dsh_attachments WHERE id_key = $1', [key])
}
