import { ioError } from './errors.js'
import { writevAtSync } from './fs-io.js'
import type { LogContext } from './log-context.js'
import { type OpenedWriter, openWriter, type Writer } from './session-writer.js'

/**
 * The open writers of a backend and the order of operations on each
 * session. Appends, loads and deletes of one session run one at a time, on
 * the session's chain (`serial`); the writers (lock and open log) of the
 * `maxOpenWriters` sessions used last stay open between operations, the
 * least recently used beyond it are released through their own chain,
 * after anything already queued there.
 */
export class WriterPool {
  readonly #ctx: LogContext
  readonly #maxOpen: number
  /** Open writers in least-recently-used order (Map iteration order). */
  readonly #writers = new Map<string, Writer>()
  /** Per-session operation chains. */
  readonly #chains = new Map<string, Promise<void>>()
  /** Operations of each session queued or running on its chain (absent: none). */
  readonly #queued = new Map<string, number>()
  /** Writers queued for release because more than `maxOpen` are open. */
  readonly #evicting = new Set<string>()

  constructor(ctx: LogContext, maxOpen: number) {
    this.#ctx = ctx
    this.#maxOpen = maxOpen
  }

  /** The open writer of `id`, if any (it may be queued for release). */
  get(id: string): Writer | undefined {
    return this.#writers.get(id)
  }

  /** The open writer of `id` when it takes appends: open and not queued for release. */
  live(id: string): Writer | undefined {
    return this.#evicting.has(id) ? undefined : this.#writers.get(id)
  }

  /** Whether an operation of `id` is queued or running. */
  busy(id: string): boolean {
    return this.#queued.has(id)
  }

  /** Runs `operation` on `id`'s chain, after every operation of `id` called before it. */
  serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(id) ?? Promise.resolve()
    const result = previous.then(operation)
    this.#queued.set(id, (this.#queued.get(id) ?? 0) + 1)
    // Counted out by the first reaction to the result: before any caller awaiting it resumes.
    const settled = (): void => {
      const left = this.#queued.get(id)! - 1
      if (left === 0) this.#queued.delete(id)
      else this.#queued.set(id, left)
      if (this.#chains.get(id) === tail) this.#chains.delete(id)
    }
    const tail = result.then(settled, settled)
    this.#chains.set(id, tail)
    return result
  }

  /** The writer of `id`: the open one, or its log opened (`openWriter`) and kept. Call it on `id`'s chain. */
  async open(id: string, mode: 'create' | 'existing'): Promise<OpenedWriter> {
    const writer = this.#writers.get(id)
    if (writer !== undefined) return { kind: 'writer', writer, truncated: false }
    const opened = await openWriter(this.#ctx, id, mode)
    if (opened.kind === 'writer') this.remember(opened.writer)
    return opened
  }

  /** Keeps `writer` open as the most recently used; queues the release of the least recently used beyond `maxOpen`. */
  remember(writer: Writer): void {
    this.#writers.delete(writer.id)
    this.#writers.set(writer.id, writer)
    let excess = this.#writers.size - this.#evicting.size - this.#maxOpen
    for (const [otherId, other] of this.#writers) {
      if (excess <= 0) break
      if (otherId === writer.id || this.#evicting.has(otherId)) continue
      this.#evicting.add(otherId)
      excess--
      void this.serial(otherId, () => this.release(other)).catch(() => {})
    }
  }

  /** Stops keeping `writer` (its log is being deleted); the caller closes it. */
  forget(writer: Writer): void {
    if (this.#writers.get(writer.id) === writer) this.#writers.delete(writer.id)
  }

  /** Closes `writer`'s log and releases its lock, without settling its slot (a failed write, a damaged log). */
  async drop(writer: Writer): Promise<void> {
    this.forget(writer)
    this.#evicting.delete(writer.id)
    try {
      await writer.handle.close()
    } finally {
      await writer.lock.release()
    }
  }

  /** Releases a writer in order (eviction, close): its log's newest slot brought to the committed end first (`settle`). */
  async release(writer: Writer): Promise<void> {
    await this.settle(writer)
    await this.drop(writer)
  }

  /**
   * Writes the slot that names the committed end when the newest names an
   * earlier one (`PaddedTail.planSettle`), so the log at rest reads with
   * nothing to walk. Every batch is synced already and the slot is a hint,
   * so the write is not synced; it is skipped when the lock is not
   * ours, and a failure costs readers only a walk.
   */
  async settle(writer: Writer): Promise<void> {
    if (!this.#ctx.codec.padsTail) return
    const settle = writer.tail.planSettle(writer.nextSeq)
    if (settle === undefined) return
    try {
      await writer.lock.verify(writer.label, 0)
      writevAtSync(writer.handle.fd, [settle.slot], settle.at)
      writer.tail = writer.tail.settled(settle)
    } catch {
      // Readers walk from the previous slot.
    }
  }

  /** Waits for every operation called so far, then releases every writer (lock and log). */
  async close(): Promise<void> {
    while (this.#chains.size > 0) await Promise.all(this.#chains.values())
    const writers = [...this.#writers.values()]
    this.#writers.clear()
    const results = await Promise.allSettled(
      writers.map(async (writer) => {
        await this.settle(writer)
        try {
          await writer.handle.close()
        } finally {
          await writer.lock.release()
        }
      }),
    )
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw ioError('close session logs', (failed as PromiseRejectedResult).reason)
  }
}
