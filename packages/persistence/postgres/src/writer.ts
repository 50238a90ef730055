import { persistenceError } from '@dsh/session-persistence/backend'
import type pg from 'pg'
import { ioError } from './errors.js'
import type { StoredId } from './ids.js'
import { ownWriterName } from './writer-identity.js'

/** What a transaction's body may run: statements on the writer connection, inside the transaction. */
export type WriterQuery = <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<pg.QueryResult<R>>

/**
 * The writer connection of one persistence instance: one pooled connection,
 * checked out for the instance's lifetime, that holds every session lease
 * (a session-level advisory lock per session) and runs every write.
 *
 * Invariant: a write runs on the connection that holds its session's lease.
 * If that connection dies (host crash, `pg_terminate_backend`, server
 * restart), the server drops the leases and the write fails together; the
 * next write opens a new connection and must win the lease again, so a
 * session taken over by another host in between answers `LOCKED`, never a
 * second writer.
 *
 * One statement at a time: writes of many sessions share the connection, and
 * every use of it (connect, lease, write, transaction, release, close) runs in
 * `#serial`, one after another, never on pg's own query queue (deprecated in
 * pg 8, gone in pg 9). A transaction holds the connection for its whole
 * length, so no other session's statement can land inside it.
 */
export class WriterConnection {
  readonly #pool: pg.Pool
  #client: pg.PoolClient | undefined
  /** Settles when the last queued use of the connection has; the next one starts after it. */
  #tail: Promise<unknown> = Promise.resolve()
  /** Leases held on `#client` (lock key → session id), least recently used first; cleared with it. */
  #held = new Map<string, string>()
  readonly #maxLeases: number
  readonly #onRelease: (id: string) => void
  #closed = false

  /**
   * `maxLeases` bounds the leases kept between writes: advisory locks live in
   * the server's shared lock table (about max_locks_per_transaction ×
   * max_connections entries for the whole server), so a host that wrote
   * thousands of sessions must not keep them all. Beyond it the least recently
   * used lease is given back (`onRelease` names its session); its next write
   * takes it again, or finds it taken (`LOCKED`).
   */
  constructor(pool: pg.Pool, maxLeases: number, onRelease: (id: string) => void) {
    this.#pool = pool
    this.#maxLeases = maxLeases
    this.#onRelease = onRelease
  }

  /**
   * Runs `work` alone on the connection, after every use queued before it
   * has settled (whatever its outcome). Refused once the instance is closed;
   * uses queued before `close` still run, then `close` gives the leases back.
   */
  #serial<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(closedError())
    const result = this.#tail.then(work)
    this.#tail = result.then(noop, noop)
    return result
  }

  /** The connection, (re)opened when needed. Only inside `#serial`. */
  async #connection(): Promise<pg.PoolClient> {
    if (this.#client !== undefined) return this.#client
    if (this.#closed) throw closedError()
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (error) {
      throw ioError('opening the writer connection', error)
    }
    const lost = () => this.#lost(client)
    // A checked-out client that errors with no listener would crash the process.
    client.on('error', lost)
    client.on('end', lost)
    if (this.#closed) {
      client.release(true)
      throw closedError()
    }
    try {
      await client.query(PREPARE_CONNECTION, [ownWriterName()])
    } catch (error) {
      client.release(true)
      throw ioError('preparing the writer connection', error)
    }
    this.#client = client
    this.#held = new Map()
    return client
  }

  #lost(client: pg.PoolClient): void {
    if (this.#client !== client) return
    this.#client = undefined
    this.#held = new Map()
    try {
      client.release(true)
    } catch {
      // Already released.
    }
  }

  /**
   * Takes the session's lease on the writer connection (no-op when held).
   * Another holder anywhere gives `SESSION_PERSISTENCE_LOCKED`.
   */
  lease(id: StoredId): Promise<void> {
    return this.#serial(async () => {
      await this.#lease(id)
    })
  }

  /** The open connection when it holds the lease already (marked most recently used), without waiting for anything; else undefined. Only inside `#serial`. */
  #leased(id: StoredId): pg.PoolClient | undefined {
    const client = this.#client
    if (client === undefined || !this.#held.delete(id.lock)) return undefined
    this.#held.set(id.lock, id.id)
    return client
  }

  /** `lease`, inside `#serial`: the connection that holds the lease. */
  async #lease(id: StoredId): Promise<pg.PoolClient> {
    const client = await this.#connection()
    if (this.#held.has(id.lock)) {
      // Most recently used last.
      this.#held.delete(id.lock)
      this.#held.set(id.lock, id.id)
      return client
    }
    let won: boolean
    try {
      const { rows } = await client.query<{ won: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS won', [id.lock])
      won = rows[0]!.won
    } catch (error) {
      this.#failed(client, error)
      throw ioError(`taking the writer lease of session '${id.id}'`, error)
    }
    if (!won) {
      throw persistenceError(
        'SESSION_PERSISTENCE_LOCKED',
        `Session '${id.id}' is being written by another host or process (it holds the session's writer lease). Wait for it to finish or stop; a holder that dies releases the lease with its connection.`,
        {
          details: { id: id.id },
        },
      )
    }
    if (this.#client === client) {
      this.#held.set(id.lock, id.id)
      while (this.#held.size > this.#maxLeases) await this.#evict(client)
    }
    return client
  }

  async #evict(client: pg.PoolClient): Promise<void> {
    const [lock, id] = this.#held.entries().next().value as [string, string]
    this.#held.delete(lock)
    this.#onRelease(id)
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [lock]).catch(() => {})
  }

  /** How many leases this instance holds now. */
  get leases(): number {
    return this.#held.size
  }

  /** Gives a lease back (after a delete). */
  release(id: StoredId): Promise<void> {
    return this.#serial(async () => {
      const client = this.#client
      if (client === undefined || !this.#held.delete(id.lock)) return
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [id.lock]).catch(() => {})
    })
  }

  /** Whether this instance holds the session's lease right now. */
  holds(id: StoredId): boolean {
    return this.#held.has(id.lock)
  }

  /**
   * Runs a write statement on the leased connection; a connection failure
   * drops the connection and its leases. A `name` prepares the statement once
   * per connection (the server parses and plans it once, not per append).
   */
  run<R extends pg.QueryResultRow>(id: StoredId, text: string, values: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    return this.runChosen(id, () => (name === undefined ? { text, values } : { name, text, values }))
  }

  /** `run` of the statement `choose` returns as the statement is sent: after every use queued before it, once the lease is held. */
  runChosen<R extends pg.QueryResultRow>(id: StoredId, choose: () => pg.QueryConfig): Promise<pg.QueryResult<R>> {
    return this.#serial(async () => {
      const client = this.#leased(id) ?? (await this.#lease(id))
      try {
        return await client.query<R>(choose())
      } catch (error) {
        this.#failed(client, error)
        throw error
      }
    })
  }

  /**
   * Runs `body` in one transaction on the leased connection, which it holds
   * alone until COMMIT or ROLLBACK. A body that throws rolls back; a
   * ROLLBACK that fails means the connection is gone, and it is dropped with
   * its leases.
   */
  transaction<T>(id: StoredId, body: (query: WriterQuery) => Promise<T>): Promise<T> {
    return this.#serial(async () => {
      const client = await this.#lease(id)
      const query: WriterQuery = (text, values) => client.query(text, values)
      try {
        await client.query('BEGIN')
        const result = await body(query)
        await client.query('COMMIT')
        return result
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => this.#failed(client, rollbackError))
        throw error
      }
    })
  }

  /** A statement failed: if the connection is gone (or in doubt), drop it and its leases. */
  #failed(client: pg.PoolClient, error: unknown): void {
    const state = (error as { code?: unknown })?.code
    const dataError = typeof state === 'string' && /^(22|23|40|42)/.test(state)
    if (!dataError) this.#lost(client)
  }

  /**
   * Gives every lease back, then ends the connection, after the uses queued
   * before it. The explicit unlock makes the leases free when `close`
   * resolves; ending the connection alone frees them only once the server
   * notices.
   */
  close(): Promise<void> {
    if (this.#closed) return this.#tail.then(noop)
    const done = this.#serial(async () => {
      const client = this.#client
      this.#client = undefined
      this.#held = new Map()
      if (client === undefined) return
      await client.query('SELECT pg_advisory_unlock_all()').catch(() => {})
      client.release(true)
    })
    this.#closed = true
    return done
  }
}

/**
 * Set once per writer connection (never handed back to the pool for reuse:
 * it is released destroyed).
 * - Its statements are prepared and planned once: the append names the
 *   session's partitions (`append-statement.ts`), so its generic plan locks
 *   only what it writes, and the server never spends custom plans (five,
 *   before it compares) on a statement that runs at every append.
 * - Its `application_name` names this process (`writer-identity.ts`), so any
 *   host can tell who holds a lease (`writerOf`).
 */
const PREPARE_CONNECTION = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('application_name', $1, false)"

function closedError() {
  return persistenceError('SESSION_PERSISTENCE_CLOSED', 'This PostgreSQL persistence instance is closed; open a new one.')
}

function noop(): void {}
