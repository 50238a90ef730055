import type pg from 'pg'

/** Rows written to `dsh_changes` since the last pruning past which a writer prunes (see `FeedPruner`). */
export const DEFAULT_FEED_LIMIT = 10_000

/**
 * Pruning of `dsh_changes` behind a horizon, so the table stays bounded, with
 * the semantics of the JSONL change journal's compaction:
 *
 * - `dsh_feed` keeps a **horizon** and a **base** (both xid8). Rows with
 *   `xid >= base` are verbatim; rows in `[horizon, base)` are a summary: one
 *   row per session, its latest; rows below the horizon are gone.
 * - A pruning moves the horizon to the previous base and the base to its own
 *   snapshot's xmin, deletes the rows below the new horizon, and of the rows
 *   below the new base keeps only each session's latest. A cursor is a
 *   snapshot xmin and `changes` wants the ids with a row at `xid >= cursor`:
 *   a session's latest row is at or above the cursor whenever any of its rows
 *   is, so the summary answers exactly. A cursor below the horizon cannot be
 *   answered: `rescan: true`, `behind-horizon` (the typed resync).
 * - A follower that reads the feed at least once between two prunings is
 *   never behind the horizon (its cursor is at or above the base of the
 *   pruning before its read).
 * - A transaction still running during a pruning has an xid at or above every
 *   cursor handed out meanwhile; a row it commits later below the new horizon
 *   is left for the next pruning and concerns only cursors behind it.
 *
 * Appends write no `dsh_changes` row (their batch row carries the xid); only
 * materializations, deletes and forks materialized by a delete do. So the
 * table holds at most `limit + W` verbatim rows (W: writers inserting while a
 * pruning runs, one row each) plus the summary, which holds at most one row
 * per session changed between the horizon and the base, and never more rows
 * than were verbatim before the last pruning: `rows ≤ 2 × (limit + W)`.
 *
 * Prunings serialize on the `dsh_feed` row (`FOR UPDATE`), so hosts sharing a
 * database prune once, and each re-checks the count under the lock.
 */
/** Prunes when more than `limit` rows were written since the last pruning (a negative `limit`: now); whether it pruned. */
export async function pruneChanges(pool: pg.Pool, limit: number): Promise<boolean> {
  const client = await pool.connect()
  // A checked-out connection the server drops between statements emits `error`; unheard, it would end the process.
  let lost = false
  const onLost = () => {
    lost = true
  }
  client.on('error', onLost)
  try {
    await client.query('BEGIN')
    try {
      const { rows } = await client.query<{ due: boolean }>(
        `SELECT coalesce((SELECT max(position) FROM dsh_changes), 0) - f.base_position > $1 AS due
         FROM dsh_feed f FOR UPDATE`,
        [limit],
      )
      if (rows[0]?.due !== true) {
        await client.query('COMMIT')
        return false
      }
      await client.query(
        `WITH f AS (
           UPDATE dsh_feed SET horizon = base,
                               base = pg_snapshot_xmin(pg_current_snapshot()),
                               base_position = coalesce((SELECT max(position) FROM dsh_changes), 0)
           RETURNING horizon, base),
         gone AS (DELETE FROM dsh_changes c USING f WHERE c.xid < f.horizon),
         ranked AS (
           SELECT c.position, c.xid, row_number() OVER (PARTITION BY c.id ORDER BY c.xid DESC, c.position DESC) AS n
           FROM dsh_changes c)
         DELETE FROM dsh_changes c USING ranked r, f
         WHERE c.position = r.position AND r.n > 1 AND r.xid < f.base AND r.xid >= f.horizon`,
      )
      await client.query('COMMIT')
      return true
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    }
  } finally {
    client.removeListener('error', onLost)
    client.release(lost ? true : undefined)
  }
}

/**
 * Prunes the feed off the write path: a writer calls `changed()` after each
 * commit that wrote a `dsh_changes` row; a check (and, past `limit` rows since
 * the last pruning, a pruning) runs on a pooled connection, at most one at a
 * time, one more after it when changes landed meanwhile. A failure (the
 * server went away) is counted and dropped: the next change checks again.
 */
export class FeedPruner {
  readonly #pool: pg.Pool
  readonly #limit: number
  readonly #pruned: () => void
  #running: Promise<void> | undefined
  #again = false
  #closed = false
  /** Checks that failed (an outage); nothing is lost, the next change checks again. */
  failures = 0

  constructor(pool: pg.Pool, limit: number, pruned: () => void) {
    this.#pool = pool
    this.#limit = limit
    this.#pruned = pruned
  }

  changed(): void {
    if (this.#closed) return
    if (this.#running !== undefined) {
      this.#again = true
      return
    }
    this.#running = this.#run()
  }

  async #run(): Promise<void> {
    do {
      this.#again = false
      try {
        if (await pruneChanges(this.#pool, this.#limit)) this.#pruned()
      } catch {
        this.failures++
      }
    } while (this.#again && !this.#closed)
    this.#running = undefined
  }

  /** Resolves when no check is running (one that follows a running one included). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running
  }

  /** Waits for a running check; none starts after this. */
  async close(): Promise<void> {
    this.#closed = true
    await this.#running
  }
}
