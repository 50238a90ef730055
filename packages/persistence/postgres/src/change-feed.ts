import type { SessionId } from '@dsh/session'
import type { SessionChanges } from '@dsh/session-persistence'
import type pg from 'pg'
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
 * cursor from another database (or a re-created one) asks for a rescan.
 */
export async function readChanges(pool: pg.Pool, since: string | undefined): Promise<SessionChanges> {
  const parsed = parseCursor(since)
  const { rows } = await pool.query<{ feed_id: string; xmin: string; ids: Buffer[] | null }>(
    `SELECT (SELECT feed_id FROM dsh_feed) AS feed_id,
            pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
            CASE WHEN $1::xid8 IS NULL THEN NULL
                 ELSE ARRAY(SELECT id FROM dsh_changes WHERE xid >= $1::xid8
                            UNION
                            SELECT s.id FROM dsh_batches b JOIN dsh_sessions s USING (sid) WHERE b.xid >= $1::xid8) END AS ids`,
    [parsed?.xmin ?? null],
  )
  const row = rows[0]!
  const cursor = `${row.feed_id}:${row.xmin}`
  if (parsed === undefined || parsed.feed !== row.feed_id || row.ids === null)
    return Object.freeze({ ids: Object.freeze([]), cursor, rescan: true })
  const ids = row.ids.map((bytes) => bytes.toString('utf8') as SessionId)
  return Object.freeze({ ids: Object.freeze(ids), cursor, rescan: false })
}

function parseCursor(cursor: string | undefined): { feed: string; xmin: string } | undefined {
  if (typeof cursor !== 'string') return undefined
  const match = /^([0-9a-f-]{36}):(\d{1,20})$/.exec(cursor)
  return match === null ? undefined : { feed: match[1]!, xmin: match[2]! }
}

/**
 * LISTENs on the change channel on a dedicated connection. A lost
 * connection is re-opened (with backoff) and the listener called once,
 * because notifications sent meanwhile are gone.
 */
export async function subscribeChanges(pool: pg.Pool, listener: () => void): Promise<ChangeSubscription> {
  let closed = false
  let client: pg.PoolClient | undefined
  let retry: NodeJS.Timeout | undefined
  const notify = () => {
    if (!closed) listener()
  }
  const open = async (): Promise<void> => {
    const next = await pool.connect()
    const lost = () => {
      if (client !== next) return
      client = undefined
      next.release(true)
      schedule(50)
    }
    next.on('error', lost)
    next.on('end', lost)
    next.on('notification', (message) => {
      if (message.channel === CHANGES_CHANNEL) notify()
    })
    await next.query(`LISTEN ${CHANGES_CHANNEL}`)
    if (closed) {
      next.release(true)
      return
    }
    client = next
  }
  const schedule = (delay: number) => {
    if (closed || retry !== undefined) return
    retry = setTimeout(() => {
      retry = undefined
      open().then(notify, () => schedule(Math.min(delay * 2, 2_000)))
    }, delay)
    retry.unref()
  }
  await open()
  return {
    async close() {
      closed = true
      clearTimeout(retry)
      const current = client
      client = undefined
      current?.release(true)
    },
  }
}
