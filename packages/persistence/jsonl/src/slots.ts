/**
 * A bound on operations in progress that each hold descriptors (opens of
 * logs): at most `size` hold a slot, the others wait in call order. Only for
 * operations that take no other slot of the same `Slots` while holding one
 * (a nested take could wait forever).
 */
export class Slots {
  readonly #size: number
  #taken = 0
  /** Callers waiting for a slot, first come first served (a freed slot is handed to the first). */
  readonly #waiting: Array<() => void> = []

  constructor(size: number) {
    this.#size = Math.max(1, size)
  }

  /** Slots taken now (for tests and metrics). */
  get taken(): number {
    return this.#taken
  }

  /** Runs `operation` holding a slot. */
  async run<T>(operation: () => Promise<T>): Promise<T> {
    await this.#take()
    try {
      return await operation()
    } finally {
      this.#free()
    }
  }

  async #take(): Promise<void> {
    if (this.#taken < this.#size) {
      this.#taken++
      return
    }
    // Handed over by `#free`: the count stays.
    await new Promise<void>((resolve) => this.#waiting.push(resolve))
  }

  #free(): void {
    const next = this.#waiting.shift()
    if (next !== undefined) next()
    else this.#taken--
  }
}
