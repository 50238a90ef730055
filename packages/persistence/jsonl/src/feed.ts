import type { ChangeRecorder } from './types.js'

/**
 * The log side's part of the change feed: every change of a log (create,
 * append, truncation, repair, delete, materialization) lies between a
 * `begin` record and its `end` in the root's journal (`change-journal.ts`),
 * so a follower never misses a durable change. A read-only backend records
 * nothing (it changes nothing).
 */
export class ChangeFeed {
  readonly #journal: ChangeRecorder | undefined

  constructor(journal: ChangeRecorder | undefined) {
    this.#journal = journal
  }

  /** Before a change of `id`'s log; throws `SESSION_PERSISTENCE_IO` (nothing changed) when the record cannot be written. */
  begin(id: string): string | undefined {
    return this.#journal?.begin(id)
  }

  /** After the change, committed or not. Never throws. */
  end(id: string, op: string | undefined): void {
    if (op !== undefined) this.#journal?.end(id, op)
  }

  /** Runs `change` of `id`'s log between its records. */
  async around<T>(id: string, change: () => Promise<T>): Promise<T> {
    const op = this.begin(id)
    try {
      return await change()
    } finally {
      this.end(id, op)
    }
  }
}
