import type pg from 'pg'
import { CHANGES_CHANNEL } from './schema.js'

/** The longest a commit waits to be announced to other hosts (NOTIFY). */
const ANNOUNCE_MS = 10
/**
 * How long a pool must have committed nothing for its next commit to be
 * announced at once: longer than the gaps between busy writers' commits (so
 * they keep sharing notices), shorter than the pause of a host that appends
 * now and then.
 */
const QUIET_MS = 25

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
  /** When the last commit was announced (`Date.now()`). */
  lastCommit: number
  users: number
}

const notices = new WeakMap<pg.Pool, PoolNotice>()

/**
 * Tells other hosts that something committed: NOTIFY on the change channel,
 * sent after the commit and off the write's path (on a pooled connection).
 * A commit after QUIET_MS without one on the pool is announced at once, so
 * a lone append reaches other hosts without delay. A commit that follows
 * another closely waits up to ANNOUNCE_MS and shares one notice with every
 * commit in that time, however many writes land and however many persistence
 * instances share the pool (they share one pending notice): busy writers
 * send at most one notice per ANNOUNCE_MS, each a transaction of its own. A
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
    const notice = notices.get(pool) ?? { pending: undefined, lastCommit: Number.NEGATIVE_INFINITY, users: 0 }
    notices.set(pool, notice)
    notice.users++
    this.#notice = notice
  }

  /** Announces a commit: at once on a quiet pool, else with the pool's next notice (see the class). */
  announce(): void {
    const notice = this.#notice
    if (this.#closed) return
    const now = Date.now()
    // A clock stepping back counts as a close commit: the notice waits, it is never lost.
    const lone = now - notice.lastCommit >= QUIET_MS
    notice.lastCommit = now
    if (notice.pending !== undefined) return
    const pool = this.#pool
    if (lone) {
      void notify(pool)
      return
    }
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
