import type pg from 'pg'
import { Backoff } from './backoff.js'
import { watchPool } from './pool.js'

/** What a LISTEN on one channel reports. */
export interface ChannelHandlers {
  /** A notification arrived on the channel. */
  readonly notify: () => void
  /**
   * The LISTEN was (re-)established after it was lost or could not be opened:
   * notifications sent meanwhile are gone, so the owner reads what it follows
   * once (a resync).
   */
  readonly resubscribed: () => void
  /** Opening the LISTEN failed; called on the first failure of each streak (the loop retries on its own). */
  readonly failed?: (error: unknown) => void
}

/** A LISTEN kept open until `close`. */
export interface ChannelListener {
  close(): Promise<void>
}

/**
 * LISTENs on `channel` on a dedicated pooled connection and keeps it open:
 * a connection that errors or ends (server restart or outage, terminated
 * backend) is released, and a new one is opened and LISTENs again, retried
 * with bounded exponential backoff ({@link Backoff}) while the server cannot
 * be reached. Every re-established LISTEN calls `resubscribed` once.
 *
 * Opening never rejects: when the server cannot be reached at the first
 * attempt, the listener starts retrying in the background and calls
 * `resubscribed` once it is listening. The pool is watched ({@link watchPool})
 * and the connection has an `error` listener of its own, so a lost connection
 * never becomes an uncaught error.
 */
export async function listenChannel(pool: pg.Pool, channel: string, handlers: ChannelHandlers): Promise<ChannelListener> {
  watchPool(pool)
  const listener = new Listener(pool, channel, handlers)
  if (!(await listener.open())) listener.retryLater()
  return listener
}

class Listener implements ChannelListener {
  readonly #pool: pg.Pool
  readonly #channel: string
  readonly #handlers: ChannelHandlers
  readonly #backoff: Backoff
  /** Releases the current connection (once); undefined while none is listening. */
  #drop: (() => void) | undefined
  #closed = false
  /** A failure of the current streak was reported. */
  #reported = false

  constructor(pool: pg.Pool, channel: string, handlers: ChannelHandlers) {
    this.#pool = pool
    this.#channel = channel
    this.#handlers = handlers
    this.#backoff = new Backoff(() => {
      void this.open().then((listening) => {
        if (listening) this.#call(this.#handlers.resubscribed)
        else this.retryLater()
      })
    })
  }

  /** One attempt to connect and LISTEN; resolves whether it listens now (never rejects). */
  async open(): Promise<boolean> {
    if (this.#closed) return false
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (error) {
      this.#report(error)
      return false
    }
    let released = false
    const drop = () => {
      if (released) return
      released = true
      if (this.#drop === drop) this.#drop = undefined
      // The connection is broken or no longer wanted: the pool discards it.
      try {
        client.release(true)
      } catch {
        // The pool was ended meanwhile and let go of it already.
      }
    }
    const lost = () => {
      const wasListening = this.#drop === drop
      drop()
      if (wasListening) this.retryLater()
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', (message) => {
      if (message.channel === this.#channel && !this.#closed) this.#call(this.#handlers.notify)
    })
    try {
      await client.query(`LISTEN ${this.#channel}`)
    } catch (error) {
      drop()
      this.#report(error)
      return false
    }
    if (released) return false
    if (this.#closed) {
      drop()
      return false
    }
    this.#drop = drop
    this.#backoff.succeeded()
    this.#reported = false
    return true
  }

  /** Schedules the next attempt (bounded exponential backoff). */
  retryLater(): void {
    if (!this.#closed) this.#backoff.failed()
  }

  /** A handler that throws must not break the driver's event handling or this loop: its error stays with it. */
  #call(handler: () => void): void {
    try {
      handler()
    } catch {
      // The handler's own failure; the LISTEN goes on.
    }
  }

  #report(error: unknown): void {
    // Only the first failure of a streak: an outage of minutes is one line, not one per retry.
    if (this.#reported || this.#closed) return
    this.#reported = true
    const failed = this.#handlers.failed
    if (failed !== undefined) this.#call(() => failed(error))
  }

  async close(): Promise<void> {
    this.#closed = true
    this.#backoff.stop()
    this.#drop?.()
  }
}
