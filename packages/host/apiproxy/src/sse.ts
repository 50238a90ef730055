import type { ServerResponse } from 'node:http'
import type { StreamEventBody } from '@dsh/protocol'
import { BASE_HEADERS } from './http.js'

export interface SseOptions {
  readonly heartbeatMs: number
  /** Unread bytes a slow reader may accumulate before the stream is dropped. */
  readonly maxBacklogBytes: number
}

/** The head of every event stream; a HEAD request gets it and nothing else. */
export const SSE_HEADERS = {
  ...BASE_HEADERS,
  'Content-Type': 'text/event-stream; charset=utf-8',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
} as const

/**
 * One Server-Sent Events response. Writes are fire-and-forget; a reader that
 * stops reading is disconnected once its backlog passes the limit rather than
 * growing the host's memory without bound.
 */
export class SseStream {
  readonly #res: ServerResponse
  readonly #options: SseOptions
  readonly #heartbeat: NodeJS.Timeout
  readonly #onClose = new Set<() => void>()
  #nextId = 1
  #closed = false

  constructor(res: ServerResponse, options: SseOptions) {
    this.#res = res
    this.#options = options
    res.writeHead(200, SSE_HEADERS)
    // Tell EventSource how soon to reconnect after a drop.
    res.write('retry: 2000\n\n')
    this.#heartbeat = setInterval(() => this.#write(': keep-alive\n\n'), options.heartbeatMs)
    this.#heartbeat.unref()
    res.on('close', () => this.close())
  }

  get closed(): boolean {
    return this.#closed
  }

  /** Sends one protocol stream message; `data` is serialized as a single JSON line. */
  send(message: StreamEventBody): void {
    this.#write(`id: ${this.#nextId++}\nevent: ${message.event}\ndata: ${JSON.stringify(message.data)}\n\n`)
  }

  onClose(listener: () => void): void {
    if (this.#closed) listener()
    else this.#onClose.add(listener)
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#heartbeat)
    if (!this.#res.writableEnded) this.#res.end()
    for (const listener of this.#onClose) listener()
    this.#onClose.clear()
  }

  #write(text: string): void {
    if (this.#closed) return
    if (this.#res.writableLength > this.#options.maxBacklogBytes) {
      this.#res.destroy()
      this.close()
      return
    }
    this.#res.write(text)
  }
}
