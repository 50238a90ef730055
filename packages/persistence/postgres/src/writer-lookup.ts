/**
 * Answers `writerOf` for many sessions with one read of the server's lock
 * table. `pg_locks` is built whole at every read (every lock the server
 * holds, of every database), so a host that asks for the writers of the
 * sessions a change named (the HTTP server's follower asks for up to 64 at a
 * time) pays one such read per round instead of one per session.
 *
 * Lookups asked in the same turn of the event loop share a statement; at
 * most `LOOKUP_MAX_KEYS` keys go in one, a longer round is split.
 */
export const LOOKUP_MAX_KEYS = 1_000

/**
 * The holders' `application_name` for advisory-lock keys (`$1`, 64-bit keys
 * as the lease takes them) in this database: one row per held key. The
 * server lists a 64-bit key as two 32-bit halves (`classid` the high,
 * `objid` the low, `objsubid` 1); the lock table is read once
 * (`MATERIALIZED`), whatever the number of keys.
 */
export const WRITERS_OF = `WITH l AS MATERIALIZED (
    SELECT classid::bigint AS hi, objid::bigint AS lo, pid
    FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
  SELECT DISTINCT ON (k) k::text AS lock, a.application_name AS name
  FROM unnest($1::bigint[]) AS k
  JOIN l ON l.hi = (k >> 32) & 4294967295 AND l.lo = k & 4294967295
  LEFT JOIN pg_stat_activity a ON a.pid = l.pid
  ORDER BY k`

/** Reads the holders of `locks` (each key at most once): lock key → holder's name (null: no name). Keys held by nobody are absent. */
export type ReadHolders = (locks: readonly string[]) => Promise<ReadonlyMap<string, string | null>>

interface Waiter {
  readonly resolve: (name: string | null | undefined) => void
  readonly reject: (error: unknown) => void
}

export class WriterLookups {
  readonly #read: ReadHolders
  /** Keys asked for in this turn, with who waits for each; flushed in a microtask. */
  #round: Map<string, Waiter[]> | undefined

  constructor(read: ReadHolders) {
    this.#read = read
  }

  /** The name of the lock's holder (`null`: held, by a connection with no name), or undefined: not held. */
  holder(lock: string): Promise<string | null | undefined> {
    return new Promise((resolve, reject) => {
      if (this.#round === undefined) {
        this.#round = new Map()
        queueMicrotask(() => this.#flush())
      }
      const waiting = this.#round.get(lock)
      if (waiting === undefined) this.#round.set(lock, [{ resolve, reject }])
      else waiting.push({ resolve, reject })
    })
  }

  #flush(): void {
    const round = [...(this.#round ?? [])]
    this.#round = undefined
    for (let start = 0; start < round.length; start += LOOKUP_MAX_KEYS) {
      const part = round.slice(start, start + LOOKUP_MAX_KEYS)
      this.#read(part.map(([lock]) => lock)).then(
        (holders) => {
          for (const [lock, waiters] of part) for (const w of waiters) w.resolve(holders.has(lock) ? holders.get(lock) : undefined)
        },
        (error: unknown) => {
          for (const [, waiters] of part) for (const w of waiters) w.reject(error)
        },
      )
    }
  }
}
