import { ExportResultCode } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base'

/** What became of the spans handed to the exporter. */
export interface TelemetryStats {
  /** Spans the exporter accepted. */
  readonly exported: number
  /** Spans lost: the queue was full, or their export failed. */
  readonly dropped: number
  /** Export calls that failed (each loses its whole batch). */
  readonly failedExports: number
  /** Spans waiting in the queue or in the export under way. */
  readonly pending: number
}

export interface BoundedExportOptions {
  /** Most spans waiting for export; one more is dropped and counted. */
  readonly maxQueueSize: number
  /** Most spans in one export call. */
  readonly maxBatchSize: number
  /** How long a partial batch waits for more spans, ms (the timer never keeps the process alive). */
  readonly delayMs: number
  /**
   * How long one export, or the exporter's shutdown, may take, ms: an
   * exporter that never calls back fails its batch then (its spans are
   * dropped and counted), so a flush or a disposal always ends.
   */
  readonly timeoutMs: number
  /** Called once per loss (queue full, or a failed export) with how many spans and why. */
  readonly onDrop: (count: number, why: string) => void
}

/**
 * A span processor that never makes the caller wait: `onEnd` only pushes a
 * finished span onto a bounded queue (or drops and counts it when the queue
 * is full), and one export at a time runs in the background. A slow or
 * unreachable collector therefore costs the writer nothing but the spans it
 * cannot take, which are counted in `stats()`.
 */
export class BoundedExportProcessor implements SpanProcessor {
  readonly #exporter: SpanExporter
  readonly #options: BoundedExportOptions
  readonly #queue: ReadableSpan[] = []
  #inFlight: Promise<void> | undefined
  #inFlightCount = 0
  #timer: ReturnType<typeof setTimeout> | undefined
  #exported = 0
  #dropped = 0
  #failedExports = 0
  #lastExportFailed = false
  #shutDown = false

  constructor(exporter: SpanExporter, options: BoundedExportOptions) {
    this.#exporter = exporter
    this.#options = options
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.#shutDown) return
    if (this.#queue.length >= this.#options.maxQueueSize) {
      this.#drop(1, `the export queue is full (${this.#options.maxQueueSize} spans)`)
      return
    }
    this.#queue.push(span)
    if (this.#queue.length >= this.#options.maxBatchSize) this.#kick()
    else this.#schedule()
  }

  stats(): TelemetryStats {
    return {
      exported: this.#exported,
      dropped: this.#dropped,
      failedExports: this.#failedExports,
      pending: this.#queue.length + this.#inFlightCount,
    }
  }

  /** Exports everything queued so far; resolves when every export it started has ended (accepted or counted as dropped). */
  async forceFlush(): Promise<void> {
    this.#clearTimer()
    while (this.#queue.length > 0 || this.#inFlight !== undefined) {
      if (this.#inFlight === undefined) this.#kick()
      await this.#inFlight
    }
  }

  /**
   * For a writer that can wait (a replay): a promise that settles once fewer
   * than one batch of spans waits in the queue (half the queue when a batch
   * is larger than that), so what a writer ends next fits instead of being
   * dropped; `undefined` when there is room already. A collector that failed
   * the last export is not waited for: spans past the queue are then dropped
   * and counted, as they are live.
   */
  waitForRoom(): Promise<void> | undefined {
    return this.#full() ? this.#drainToRoom() : undefined
  }

  async shutdown(): Promise<void> {
    if (this.#shutDown) return
    await this.forceFlush()
    this.#shutDown = true
    await withTimeout(
      Promise.resolve().then(() => this.#exporter.shutdown()),
      this.#options.timeoutMs,
      () => undefined,
    )
  }

  #full(): boolean {
    const room = Math.min(this.#options.maxBatchSize, Math.ceil(this.#options.maxQueueSize / 2))
    return this.#queue.length >= room && !this.#lastExportFailed
  }

  async #drainToRoom(): Promise<void> {
    while (this.#full()) {
      if (this.#inFlight === undefined) this.#kick()
      await this.#inFlight
    }
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#inFlight !== undefined) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.#kick()
    }, this.#options.delayMs)
    this.#timer.unref?.()
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  /** Starts the next export unless one is under way (the one under way starts the next when it ends). */
  #kick(): void {
    if (this.#inFlight !== undefined || this.#queue.length === 0) return
    this.#clearTimer()
    const batch = this.#queue.splice(0, this.#options.maxBatchSize)
    this.#inFlightCount = batch.length
    let resolve!: () => void
    // Set before the export starts: an exporter may call back synchronously.
    this.#inFlight = new Promise<void>((settle) => (resolve = settle))
    let settled = false
    const done = (ok: boolean, why: string): void => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      this.#lastExportFailed = !ok
      if (ok) this.#exported += batch.length
      else {
        this.#failedExports++
        this.#drop(batch.length, why)
      }
      this.#inFlight = undefined
      this.#inFlightCount = 0
      resolve()
      if (this.#queue.length >= this.#options.maxBatchSize) this.#kick()
      else if (this.#queue.length > 0) this.#schedule()
    }
    // Kept referenced while the export runs: a disposal waiting on it ends when it fires.
    const deadline = setTimeout(
      () => done(false, `the exporter did not answer within ${this.#options.timeoutMs} ms`),
      this.#options.timeoutMs,
    )
    try {
      this.#exporter.export(batch, (result) =>
        done(result.code === ExportResultCode.SUCCESS, `the export failed (${describe(result.error)})`),
      )
    } catch (error) {
      done(false, `the exporter threw (${describe(error)})`)
    }
  }

  #drop(count: number, why: string): void {
    this.#dropped += count
    this.#options.onDrop(count, why)
  }
}

/** `promise`, or `onTimeout()` once `ms` have passed without it settling. */
async function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

function describe(error: unknown): string {
  if (error === undefined) return 'no reason given'
  return error instanceof Error ? error.message : String(error)
}
