import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { HTTP_RETRY_AFTER_SECONDS } from '@dsh/protocol/limits'
import { ApiError } from './errors.js'
import type { ApiLimits } from './limits.js'

/**
 * What the answers of one handler may hold, so that clients that pipeline or
 * stop reading cost a bounded amount of memory:
 *
 * - At most `maxConcurrentRequests` reads (GET, HEAD) are being answered at
 *   once (reading and building their answers); the others wait their turn
 *   in arrival order, holding nothing but their request. A POST takes no
 *   turn: its answer is small, and a compaction waits on its model for as
 *   long as the model takes, which must not stop the reads.
 * - One request per connection is served at a time. `node:http` hands over
 *   every request it parses from a connection at once (a client may pipeline
 *   hundreds in one packet) and queues their answers; here a request starts
 *   when the answer before it on its connection has been taken by the kernel
 *   or dropped, and a request whose connection closed meanwhile never starts.
 *   More than `maxPipelined` waiting on one connection closes it.
 * - An answer that the client has not taken `drainTimeoutMs` after it was
 *   written closes its connection (an event stream, never ended, is bounded
 *   by its own backlog limit instead).
 * - Answers written and not yet taken hold at most `maxQueuedBytes` together:
 *   beyond it a new answer is refused with `503 API_BUSY` (`Retry-After`);
 *   an answer alone over the bound is sent when nothing else is queued.
 */
export class AnswerQueue {
  readonly #limits: ApiLimits
  readonly #connections = new WeakMap<Socket, { tail: Promise<void>; waiting: number }>()
  #queuedBytes = 0
  /** Requests being answered now, and the ones waiting for a turn (at most one per connection). */
  #active = 0
  readonly #turns: Array<() => void> = []

  constructor(limits: ApiLimits) {
    this.#limits = limits
  }

  /** Bytes of answers written and not yet taken by their clients' kernels. */
  get queuedBytes(): number {
    return this.#queuedBytes
  }

  /** Runs `serve` (which answers `res` and never rejects) once the earlier requests of `req`'s connection are answered. */
  serve(req: IncomingMessage, res: ServerResponse, serve: () => Promise<void>): void {
    const socket = req.socket
    let connection = this.#connections.get(socket)
    if (connection === undefined) {
      connection = { tail: Promise.resolve(), waiting: 0 }
      this.#connections.set(socket, connection)
    }
    if (connection.waiting >= this.#limits.maxPipelined) {
      socket.destroy()
      return
    }
    connection.waiting += 1
    const own = connection
    own.tail = own.tail.then(async () => {
      try {
        if (socket.destroyed || res.destroyed) return
        const reading = isRead(req)
        if (reading) await this.#turn()
        try {
          if (socket.destroyed || res.destroyed) return
          await serve()
        } finally {
          if (reading) this.#release()
        }
        await this.#taken(res)
      } catch {
        // `serve` answers its own failures; anything left ends the connection rather than the chain.
        res.destroy()
      } finally {
        own.waiting -= 1
      }
    })
  }

  /**
   * Counts `bytes` about to be written to `res` until the client's kernel has
   * taken them or the connection is gone; `API_BUSY` when the answers already
   * queued leave no room for them.
   */
  reserve(res: ServerResponse, bytes: number): void {
    if (this.#queuedBytes > 0 && this.#queuedBytes + bytes > this.#limits.maxQueuedBytes) {
      throw new ApiError(
        'API_BUSY',
        `This host holds at most ${this.#limits.maxQueuedBytes} bytes of answers its clients have not read yet, and they are in use; retry in ${HTTP_RETRY_AFTER_SECONDS} s.`,
        { details: { retryAfter: HTTP_RETRY_AFTER_SECONDS } },
      )
    }
    this.#queuedBytes += bytes
    let released = false
    const release = () => {
      if (released) return
      released = true
      this.#queuedBytes -= bytes
    }
    res.once('finish', release)
    res.once('close', release)
  }

  #turn(): Promise<void> {
    if (this.#active < this.#limits.maxConcurrentRequests) {
      this.#active += 1
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#turns.push(resolve))
  }

  /** Hands the turn to the longest waiting request, if any. */
  #release(): void {
    const next = this.#turns.shift()
    if (next === undefined) this.#active -= 1
    else next()
  }

  /** Resolves once `res` is taken whole by the kernel or closed; an ended answer not taken within `drainTimeoutMs` closes its connection. */
  #taken(res: ServerResponse): Promise<void> {
    if (res.writableFinished || res.destroyed) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = res.writableEnded ? setTimeout(() => res.destroy(), this.#limits.drainTimeoutMs).unref() : undefined
      const done = () => {
        clearTimeout(timer)
        resolve()
      }
      res.once('finish', done)
      res.once('close', done)
    })
  }
}

/** A request that reads and builds an answer from the store (the ones `maxConcurrentRequests` bounds). */
function isRead(req: IncomingMessage): boolean {
  return req.method === 'GET' || req.method === 'HEAD'
}
