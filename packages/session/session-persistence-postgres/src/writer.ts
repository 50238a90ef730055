import type pg from 'pg'
import { ioError, persistenceError } from './errors.js'
import type { StoredId } from './ids.js'

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
 */
export class WriterConnection {
  readonly #pool: pg.Pool
  #client: pg.PoolClient | undefined
  #connecting: Promise<pg.PoolClient> | undefined
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

  /** The connection, (re)opened when needed. */
  async client(): Promise<pg.PoolClient> {
    if (this.#closed)
      throw persistenceError('SESSION_PERSISTENCE_CLOSED', 'This PostgreSQL persistence instance is closed; open a new one.')
    if (this.#client !== undefined) return this.#client
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined
    })
    return this.#connecting
  }

  async #connect(): Promise<pg.PoolClient> {
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
      throw persistenceError('SESSION_PERSISTENCE_CLOSED', 'This PostgreSQL persistence instance is closed; open a new one.')
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
  async lease(id: StoredId): Promise<pg.PoolClient> {
    const client = await this.client()
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
  async release(id: StoredId): Promise<void> {
    const client = this.#client
    if (client === undefined || !this.#held.delete(id.lock)) return
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [id.lock]).catch(() => {})
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
  async run<R extends pg.QueryResultRow>(id: StoredId, text: string, values: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    const client = await this.lease(id)
    try {
      return await client.query<R>(name === undefined ? { text, values } : { name, text, values })
    } catch (error) {
      this.#failed(client, error)
      throw error
    }
  }

  /** A statement failed: if the connection is gone (or in doubt), drop it and its leases. */
  #failed(client: pg.PoolClient, error: unknown): void {
    const state = (error as { code?: unknown })?.code
    const dataError = typeof state === 'string' && /^(22|23|40|42)/.test(state)
    if (!dataError) this.#lost(client)
  }

  /**
   * Gives every lease back, then ends the connection. The explicit unlock
   * makes the leases free when `close` resolves; ending the connection alone
   * frees them only once the server notices.
   */
  async close(): Promise<void> {
    this.#closed = true
    const client = this.#client ?? (await this.#connecting?.catch(() => undefined))
    this.#client = undefined
    this.#held = new Map()
    if (client === undefined) return
    await client.query('SELECT pg_advisory_unlock_all()').catch(() => {})
    client.release(true)
  }
}
