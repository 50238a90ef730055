/** One parsed Server-Sent Event. */
export interface SseEvent {
  readonly event: string
  readonly data: unknown
}

/**
 * Reads an SSE response over real HTTP and hands out events as they arrive;
 * `next(predicate)` waits (bounded) for the first matching event.
 */
export class SseReader {
  readonly events: SseEvent[] = []
  readonly #waiters: Array<{ predicate: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void }> = []
  readonly #controller = new AbortController()
  readonly status: number
  readonly contentType: string | null
  #cursor = 0
  readonly #done: Promise<void>

  private constructor(response: Response) {
    this.status = response.status
    this.contentType = response.headers.get('content-type')
    this.#done = response.ok && response.body ? this.#pump(response.body) : Promise.resolve()
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<SseReader> {
    const controller = new AbortController()
    const response = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: controller.signal })
    const reader = new SseReader(response)
    reader.#controller.signal.addEventListener('abort', () => controller.abort())
    return reader
  }

  /**
   * The next event (after those already taken) that matches. `timeoutMs`
   * only guards a hang: a busy machine may take many seconds to deliver an
   * event, and a verdict never depends on how soon it comes.
   */
  next(predicate: (event: SseEvent) => boolean = () => true, timeoutMs = 120_000): Promise<SseEvent> {
    for (; this.#cursor < this.events.length; this.#cursor++) {
      const event = this.events[this.#cursor]!
      if (predicate(event)) {
        this.#cursor++
        return Promise.resolve(event)
      }
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching SSE event within ${timeoutMs} ms; got ${JSON.stringify(this.events)}`)),
        timeoutMs,
      )
      this.#waiters.push({
        predicate,
        resolve: (event) => {
          clearTimeout(timer)
          resolve(event)
        },
      })
    })
  }

  close(): void {
    this.#controller.abort()
  }

  /** Resolves once the server has ended the stream (or `close()` aborted it). */
  ended(): Promise<void> {
    return this.#done
  }

  async #pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder()
    let buffer = ''
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true })
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          let event = 'message'
          const data: string[] = []
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) event = line.slice(7)
            else if (line.startsWith('data: ')) data.push(line.slice(6))
          }
          if (data.length === 0) continue
          const parsed: SseEvent = { event, data: JSON.parse(data.join('\n')) }
          this.events.push(parsed)
          const index = this.#waiters.findIndex((w) => w.predicate(parsed))
          if (index !== -1) {
            this.#cursor = this.events.length
            this.#waiters.splice(index, 1)[0]!.resolve(parsed)
          }
        }
      }
    } catch {
      // Aborted by close().
    }
  }
}
