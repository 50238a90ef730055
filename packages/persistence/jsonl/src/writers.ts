import { ioError } from './errors.js'
import { isErrno, writevAtSync } from './fs-io.js'
import type { LogContext } from './log-context.js'
import { type OpenedWriter, openWriter, type Writer } from './session-writer.js'
import { Slots } from './slots.js'
import type { WriterLock } from './writer-lock.js'

/** Where a session's first append creates its log: the session directory, its writer lock, the directory entry made durable. */
export interface NewLogPlace {
  readonly dir: string
  readonly lock: WriterLock
  /** The directory's entry made durable (awaited before the log is linked). */
  readonly rootSync: Promise<void>
}

/** The most opens (lock taken, log opened or created) in progress at once: each holds a few descriptors until it ends. */
export const MAX_OPENING = 32

/**
 * The open writers of a backend and the order of operations on each
 * session. Appends, loads and deletes of one session run one at a time, on
 * the session's chain (`serial`); the writers (lock and open log) of the
 * `maxOpenWriters` sessions used last stay open between operations, the
 * least recently used beyond it are released through their own chain,
 * after anything already queued there.
 *
 * Open descriptors stay bounded however many sessions are opened or created
 * at once: at most `MAX_OPENING` opens run at a time (the others wait for a
 * slot, in order), so a burst holds about two descriptors per kept writer
 * (lock and log) plus a few per open in progress. An open that fails for
 * want of descriptors (EMFILE, ENFILE: a process limit below what the pool
 * keeps) makes the pool keep fewer writers — half those open — releases the
 * idle ones beyond that and is tried once more; each later open lets the
 * pool keep one more, up to `maxOpenWriters`.
 */
export class WriterPool {
  readonly #ctx: LogContext
  readonly #maxOpen: number
  /** Writers kept open now: `maxOpen`, or fewer after running out of descriptors. */
  #keep: number
  /** Opens in progress: at most `MAX_OPENING` (or `maxOpen` when fewer). */
  readonly #opening: Slots
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
    this.#keep = maxOpen
    this.#opening = new Slots(Math.min(maxOpen, MAX_OPENING))
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

  /** The writer of `id`: the open one, or its log opened (`openWriter`, in a slot) and kept. Call it on `id`'s chain. */
  async open(id: string, mode: 'existing'): Promise<Exclude<OpenedWriter, { kind: 'absent' }>> {
    return (await this.#open(id, mode, undefined)) as Exclude<OpenedWriter, { kind: 'absent' }>
  }

  /**
   * The writer of `id` as `open` gives it, or, for a session without a log,
   * what `create` returns: given the directory (made when missing) and the
   * held lock, it publishes the log and keeps its writer, in the same slot.
   * Call it on `id`'s chain.
   */
  async openOrCreate<T>(
    id: string,
    create: (place: NewLogPlace) => Promise<T>,
  ): Promise<Exclude<OpenedWriter, { kind: 'absent' }> | { readonly kind: 'created'; readonly value: T }> {
    return (await this.#open(id, 'create', create)) as Exclude<OpenedWriter, { kind: 'absent' }> | { kind: 'created'; value: T }
  }

  async #open<T>(
    id: string,
    mode: 'create' | 'existing',
    create: ((place: NewLogPlace) => Promise<T>) | undefined,
  ): Promise<OpenedWriter | { kind: 'created'; value: T }> {
    const writer = this.#writers.get(id)
    if (writer !== undefined) return { kind: 'writer', writer, truncated: false }
    return this.#opening.run(async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          const opened = await openWriter(this.#ctx, id, mode)
          let result: OpenedWriter | { kind: 'created'; value: T } = opened
          if (opened.kind === 'writer') this.remember(opened.writer)
          else if (opened.kind === 'absent' && create !== undefined) result = { kind: 'created', value: await create(opened) }
          if (this.#keep < this.#maxOpen) this.#keep++
          return result
        } catch (error) {
          // A failed open or create leaves nothing behind (no lock, no directory it made): it can be tried again.
          if (attempt > 0 || !outOfDescriptors(error) || !(await this.#shed())) throw error
        }
      }
    })
  }

  /**
   * After an open ran out of descriptors: keeps half the writers open now,
   * releases the least recently used beyond that, and waits for those whose
   * chain was idle (the others are released after their queued operations).
   * Whether any was released (a second try may then find a descriptor).
   */
  async #shed(): Promise<boolean> {
    this.#keep = Math.max(1, Math.floor((this.#writers.size - this.#evicting.size) / 2))
    const idle = this.#evict(undefined)
    await Promise.all(idle)
    return idle.length > 0
  }

  /** Keeps `writer` open as the most recently used; queues the release of the least recently used beyond the writers kept. */
  remember(writer: Writer): void {
    this.#writers.delete(writer.id)
    this.#writers.set(writer.id, writer)
    this.#evict(writer.id)
  }

  /**
   * Queues the release of the least recently used writers beyond those kept
   * (never `except`'s), each on its own chain; the releases of those whose
   * chain was idle (they run at once).
   */
  #evict(except: string | undefined): Promise<void>[] {
    const idle: Promise<void>[] = []
    let excess = this.#writers.size - this.#evicting.size - this.#keep
    for (const [otherId, other] of this.#writers) {
      if (excess <= 0) break
      if (otherId === except || this.#evicting.has(otherId)) continue
      const waits = this.busy(otherId)
      this.#evicting.add(otherId)
      excess--
      const released = this.serial(otherId, () => this.release(other)).catch(() => {})
      if (!waits) idle.push(released)
    }
    return idle
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

/** Whether `error` (or an error it was caused by) is a process or system running out of file descriptors. */
export function outOfDescriptors(error: unknown): boolean {
  for (let at = error, depth = 0; at !== undefined && at !== null && depth < 4; at = (at as { cause?: unknown }).cause, depth++) {
    if (isErrno(at, 'EMFILE', 'ENFILE')) return true
  }
  return false
}
