import type pg from 'pg'
import { CHANGES_CHANNEL } from './schema.js'

/** The longest a commit waits to be announced to other hosts (NOTIFY). */
const ANNOUNCE_MS = 10

/**
 * The notice, committed without waiting for its WAL flush
 * (`synchronous_commit` off for its one transaction). A transaction that
 * notifies holds the server's notify lock until its commit ends, so notices
 * committed with a flush each are flushed one after another, beside the
 * writers' group commits; a notice is a hint that needs no durability.
 */
const NOTIFY = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"

/** The notice pending on one pool, shared by every instance over it. */
interface PoolNotice {
  pending: NodeJS.Timeout | undefined
  users: number
}

const notices = new WeakMap<pg.Pool, PoolNotice>()

/**
 * Tells other hosts that something committed: NOTIFY on the change channel,
 * sent after the commit and off the write's path (on a pooled connection),
 * at most once per ANNOUNCE_MS however many writes landed — and however many
 * persistence instances share the pool: they share one pending notice. A
 * notice is only a hint to call `changes`, which is exact: a notice lost with
 * a crashing host delays other hosts' view until their next read of the
 * feed, it never makes it wrong.
 */
export class ChangeAnnouncer {
  readonly #pool: pg.Pool
  readonly #notice: PoolNotice
  #closed = false

  constructor(pool: pg.Pool) {
    this.#pool = pool
    const notice = notices.get(pool) ?? { pending: undefined, users: 0 }
    notices.set(pool, notice)
    notice.users++
    this.#notice = notice
  }

  /** Schedules one notice for every commit on the pool since the last one sent. */
  announce(): void {
    const notice = this.#notice
    if (notice.pending !== undefined || this.#closed) return
    const pool = this.#pool
    notice.pending = setTimeout(() => {
      notice.pending = undefined
      void notify(pool)
    }, ANNOUNCE_MS)
    notice.pending.unref()
  }

  /** Sends the pool's pending notice at once (if any); this instance's later commits are not announced. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const notice = this.#notice
    if (--notice.users === 0) notices.delete(this.#pool)
    if (notice.pending === undefined) return
    clearTimeout(notice.pending)
    notice.pending = undefined
    await notify(this.#pool)
  }
}

function notify(pool: pg.Pool): Promise<void> {
  return pool.query(NOTIFY, [CHANGES_CHANNEL, '']).then(
    () => {},
    () => {},
  )
}
