import type pg from 'pg'
import { CHANGES_CHANNEL } from './schema.js'

/** The longest a commit waits to be announced to other hosts (NOTIFY). */
const ANNOUNCE_MS = 10

/**
 * Tells other hosts that something committed: NOTIFY on the change channel,
 * sent after the commit and off the write's path (on a pooled connection),
 * at most once per ANNOUNCE_MS however many writes landed. A notice is only
 * a hint to call `changes`, which is exact: a notice lost with a crashing
 * host delays other hosts' view until their next read of the feed, it never
 * makes it wrong.
 */
export class ChangeAnnouncer {
  readonly #pool: pg.Pool
  #pending: NodeJS.Timeout | undefined
  #closed = false

  constructor(pool: pg.Pool) {
    this.#pool = pool
  }

  /** Schedules one notice for every commit since the last one sent. */
  announce(): void {
    if (this.#pending !== undefined || this.#closed) return
    this.#pending = setTimeout(() => {
      this.#pending = undefined
      void this.#notify()
    }, ANNOUNCE_MS)
    this.#pending.unref()
  }

  /** Sends the pending notice at once (if any); later commits are not announced. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    if (this.#pending === undefined) return
    clearTimeout(this.#pending)
    this.#pending = undefined
    await this.#notify()
  }

  #notify(): Promise<void> {
    return this.#pool.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, '']).then(
      () => {},
      () => {},
    )
  }
}
