import type { SessionId } from '@dsh/session'
import type { SessionChanges, SessionRescanReason } from '@dsh/session-persistence'
import type pg from 'pg'
import { listenChannel } from './listener.js'
import { CHANGES_CHANNEL } from './schema.js'

/** A live LISTEN on the change channel. */
export interface ChangeSubscription {
  close(): Promise<void>
}

/**
 * The change feed. Every write is stamped with its transaction id (xid8): an
 * append in its batch row, anything else (materialization, delete) in a
 * `dsh_changes` row. A read takes, in one statement, the changes with
 * `xid >= since` and the xmin of its own snapshot as the next cursor: every
 * transaction below that xmin had finished before the read, so its rows (if
 * it committed) were visible to it; anything at or above is read again next
 * time. Ids may repeat across reads, never go missing.
 *
 * A cursor is `<feed id>:<xmin>`; the feed id is random per database, so a
 * cursor from another database (or a re-created one) asks for a rescan
 * (`unknown-cursor`). The table is pruned behind a horizon
 * (`feed-pruning.ts`): a cursor below it asks for one (`behind-horizon`).
 */
export async function readChanges(pool: pg.Pool, since: string | undefined): Promise<SessionChanges> {
  const parsed = parseCursor(since)
  const { rows } = await pool.query<{ feed_id: string; xmin: string; behind: boolean | null; ids: Buffer[] | null }>(
    `SELECT f.feed_id,
            pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
            $1::xid8 < f.horizon AS behind,
            CASE WHEN $1::xid8 IS NULL OR $1::xid8 < f.horizon THEN NULL
                 ELSE ARRAY(SELECT id FROM dsh_changes WHERE xid >= $1::xid8
                            UNION
                            SELECT s.id FROM dsh_batches b JOIN dsh_sessions s USING (id_key, sid) WHERE b.xid >= $1::xid8) END AS ids
     FROM dsh_feed f`,
    [parsed?.xmin ?? null],
  )
  const row = rows[0]!
  const cursor = `${row.feed_id}:${row.xmin}`
  const reason: SessionRescanReason | undefined =
    since === undefined
      ? 'no-cursor'
      : parsed === undefined || parsed.feed !== row.feed_id
        ? 'unknown-cursor'
        : row.behind === true || row.ids === null
          ? 'behind-horizon'
          : undefined
  if (reason !== undefined) return Object.freeze({ ids: Object.freeze([]), cursor, rescan: true, rescanReason: reason })
  const ids = row.ids!.map((bytes) => bytes.toString('utf8') as SessionId)
  return Object.freeze({ ids: Object.freeze(ids), cursor, rescan: false })
}

function parseCursor(cursor: string | undefined): { feed: string; xmin: string } | undefined {
  if (typeof cursor !== 'string') return undefined
  const match = /^([0-9a-f-]{36}):(\d{1,20})$/.exec(cursor)
  return match === null ? undefined : { feed: match[1]!, xmin: match[2]! }
}

/** What a change subscription reports besides changes. */
export interface ChangeSubscriptionOptions {
  /** The LISTEN cannot be opened now (first failure of each streak; it retries on its own). */
  readonly failed?: (error: unknown) => void
}

/**
 * LISTENs on the change channel on a dedicated connection ({@link listenChannel}):
 * `listener` runs on every notice, and once each time a lost or not yet
 * opened LISTEN is established (notices sent meanwhile are gone: the
 * listener reads the feed, which is exact). Never rejects for an
 * unreachable server: the LISTEN is retried with bounded backoff.
 */
export function subscribeChanges(
  pool: pg.Pool,
  listener: () => void,
  options: ChangeSubscriptionOptions = {},
): Promise<ChangeSubscription> {
  return listenChannel(pool, CHANGES_CHANNEL, {
    notify: listener,
    resubscribed: listener,
    ...(options.failed === undefined ? {} : { failed: options.failed }),
  })
}
