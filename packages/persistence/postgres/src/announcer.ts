import type pg from 'pg'
import { CHANGES_CHANNEL } from './schema.js'

/** The longest a commit waits to be announced to other hosts when no append carries a notice (NOTIFY). */
const ANNOUNCE_MS = 10
/**
 * How long a pool must have committed nothing for its next commit to be
 * announced at once: longer than the gaps between busy writers' commits (so
 * they keep sharing notices), shorter than the pause of a host that appends
 * now and then.
 */
const QUIET_MS = 25

/**
 * The notice of its own, committed without waiting for its WAL flush
 * (`synchronous_commit` off for its one transaction). A transaction that
 * notifies holds the server's notify lock until its commit ends, so notices
 * committed with a flush each are flushed one after another, beside the
 * writers' group commits; a notice is a hint that needs no durability.
 */
const NOTIFY = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"

/** The notice state of one pool, shared by every instance over it. */
interface PoolNotice {
  pending: NodeJS.Timeout | undefined
  /** When the last commit finished (`Date.now()`). */
  lastCommit: number
  /** When the last notice was sent, carried by an append or of its own (`Date.now()`). */
  lastNotice: number
  /** A commit finished that no notice sent after it announces yet. */
  owed: boolean
  /** Whether an append carrying the pool's notice is on its way (at most one at a time). */
  carrying: boolean
  users: number
}

const notices = new WeakMap<pg.Pool, PoolNotice>()

/**
 * Tells other hosts that something committed: NOTIFY on the change channel.
 *
 * An append may carry the notice in its own statement (`carry`): the
 * notice is delivered with its commit, and it announces every commit on the
 * pool that finished before the append was sent. It costs the server no
 * transaction and the host no round trip of their own. One append per pool
 * carries at a time, and at most one per ANNOUNCE_MS: a lone append carries
 * its own, busy writers share one per carrier, whose commit holds the notify
 * lock through its WAL flush (one at a time per server).
 *
 * A commit no carrier announces (a commit that finished while a carrier was
 * on its way, a create, a delete) is announced by the next carrier sent
 * after it; while none is on its way, by a notice of its own, sent after
 * the commit and off the write's path (on a pooled connection): at once on a
 * pool quiet for QUIET_MS, else within ANNOUNCE_MS, shared by every commit in
 * that time however many persistence instances share the pool.
 *
 * A notice is only a hint to call `changes`, which is exact: a notice lost
 * with a crashing host delays other hosts' view until their next read of the
 * feed, it never makes it wrong.
 */
export class ChangeAnnouncer {
  readonly #pool: pg.Pool
  readonly #notice: PoolNotice
  #closed = false

  constructor(pool: pg.Pool) {
    this.#pool = pool
    const notice = notices.get(pool) ?? {
      pending: undefined,
      lastCommit: Number.NEGATIVE_INFINITY,
      lastNotice: Number.NEGATIVE_INFINITY,
      owed: false,
      carrying: false,
      users: 0,
    }
    notices.set(pool, notice)
    notice.users++
    this.#notice = notice
  }

  /**
   * Called as an append is sent: whether it carries the pool's notice. When
   * it does, it announces every commit finished before it, and `carried`
   * must follow once it has finished, whatever the outcome.
   */
  carry(): boolean {
    const notice = this.#notice
    const now = Date.now()
    // A clock stepping back counts as a recent notice: the commit is announced later, never lost.
    if (this.#closed || notice.carrying || now - notice.lastNotice < ANNOUNCE_MS) return false
    notice.carrying = true
    notice.lastNotice = now
    notice.owed = false
    if (notice.pending !== undefined) {
      clearTimeout(notice.pending)
      notice.pending = undefined
    }
    return true
  }

  /** A carrying append finished: `delivered` when it committed with its notice (else the commits it was to announce are owed again). */
  carried(delivered: boolean): void {
    const notice = this.#notice
    notice.carrying = false
    notice.lastCommit = Date.now()
    if (!delivered) notice.owed = true
    if (notice.owed) this.#schedule(false)
  }

  /** Announces a commit that carried no notice (see the class). */
  announce(): void {
    if (this.#closed) return
    const notice = this.#notice
    const now = Date.now()
    // A clock stepping back counts as a close commit: the notice waits, it is never lost.
    const lone = now - notice.lastCommit >= QUIET_MS
    notice.lastCommit = now
    notice.owed = true
    this.#schedule(lone)
  }

  /** A notice of its own for the owed commits, unless a carrier on its way will see to them or one is pending. */
  #schedule(atOnce: boolean): void {
    const notice = this.#notice
    if (notice.carrying || notice.pending !== undefined) return
    const pool = this.#pool
    if (atOnce) {
      send(pool, notice)
      return
    }
    notice.pending = setTimeout(() => {
      notice.pending = undefined
      // A carrier sent meanwhile announces the owed commits when it finishes (or owes them again).
      if (notice.owed && !notice.carrying) send(pool, notice)
    }, ANNOUNCE_MS)
    notice.pending.unref()
  }

  /** Sends the pool's pending notice at once (if any); this instance's later commits are neither announced nor carry notices. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const notice = this.#notice
    if (--notice.users === 0) notices.delete(this.#pool)
    if (notice.pending === undefined) return
    clearTimeout(notice.pending)
    notice.pending = undefined
    if (!notice.owed) return
    notice.owed = false
    notice.lastNotice = Date.now()
    await notify(this.#pool)
  }
}

function send(pool: pg.Pool, notice: PoolNotice): void {
  notice.owed = false
  notice.lastNotice = Date.now()
  void notify(pool)
}

function notify(pool: pg.Pool): Promise<void> {
  return pool.query(NOTIFY, [CHANGES_CHANNEL, '']).then(
    () => {},
    () => {},
  )
}
