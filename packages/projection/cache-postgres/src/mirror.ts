/** Sessions whose rows the mirror keeps by default (see README, "The mirror's bound"). */
export const DEFAULT_MIRROR_SESSIONS = 10_000

/** A stored row, as the mirror keeps it. */
export interface MirrorRow {
  readonly identity: string
  readonly inherited: number
  readonly stateVersion: number
  readonly seq: number
  readonly failed: boolean
  /** The state's JSON, parsed only on a hit. */
  readonly state: string | null
}

/** What the mirror holds and did, for tests and operators. */
export interface MirrorStats {
  /** Sessions held (never more than the bound). */
  readonly sessions: number
  /** Rows held (at most the bound × the registered units). */
  readonly rows: number
  /** The bound: sessions held at most. */
  readonly limit: number
  /** Sessions dropped as the least recently used. */
  readonly evictions: number
  /** Sessions read from the table after a lookup missed them (see `CheckpointMirror`). */
  readonly loads: number
  /** Loads that failed (the server went away); retried with backoff. */
  readonly failedLoads: number
}

/**
 * The rows of at most `limit` sessions, the least recently used dropped
 * first. A session is used when a lookup reads it and when rows of it are
 * written or read from the table. A session held with no rows is known to
 * have none (it was loaded), so looking it up again costs no round trip.
 */
export class CheckpointMirror {
  readonly limit: number
  readonly #sessions = new Map<string, Map<string, MirrorRow>>()
  #rows = 0
  evictions = 0

  constructor(limit: number) {
    this.limit = limit
  }

  get size(): number {
    return this.#sessions.size
  }

  get rows(): number {
    return this.#rows
  }

  /** The session's rows, marked most recently used; `undefined` when not held. */
  use(id: string): ReadonlyMap<string, MirrorRow> | undefined {
    const rows = this.#sessions.get(id)
    if (rows !== undefined) {
      this.#sessions.delete(id)
      this.#sessions.set(id, rows)
    }
    return rows
  }

  has(id: string): boolean {
    return this.#sessions.has(id)
  }

  /** Sets one row (a write or a refresh: the newest the host knows). */
  set(id: string, key: string, row: MirrorRow): void {
    const rows = this.#held(id)
    if (!rows.has(key)) this.#rows++
    rows.set(key, row)
  }

  /** Keeps only the keys `keep` says to keep of a held session. */
  retain(id: string, keep: (key: string, row: MirrorRow) => boolean): void {
    const rows = this.#sessions.get(id)
    if (rows === undefined) return
    for (const [key, row] of rows)
      if (!keep(key, row)) {
        rows.delete(key)
        this.#rows--
      }
  }

  /**
   * Installs what a load read of a session: only the keys the mirror does not
   * hold (a write or a refresh that landed meanwhile is as new or newer). A
   * session loaded with no rows is held empty: known to have none.
   */
  fill(id: string, loaded: ReadonlyMap<string, MirrorRow>): void {
    const rows = this.#held(id)
    for (const [key, row] of loaded)
      if (!rows.has(key)) {
        rows.set(key, row)
        this.#rows++
      }
  }

  /** Drops a session's rows (its session was deleted). */
  forget(id: string): void {
    const rows = this.#sessions.get(id)
    if (rows === undefined) return
    this.#sessions.delete(id)
    this.#rows -= rows.size
  }

  clear(): void {
    this.#sessions.clear()
    this.#rows = 0
  }

  /** The session's rows (created empty), most recently used, the least recently used beyond the bound dropped. */
  #held(id: string): Map<string, MirrorRow> {
    let rows = this.#sessions.get(id)
    if (rows !== undefined) {
      this.#sessions.delete(id)
      this.#sessions.set(id, rows)
      return rows
    }
    rows = new Map()
    this.#sessions.set(id, rows)
    while (this.#sessions.size > this.limit) {
      const [oldest, dropped] = this.#sessions.entries().next().value as [string, Map<string, MirrorRow>]
      this.#sessions.delete(oldest)
      this.#rows -= dropped.size
      this.evictions++
    }
    return rows
  }
}
